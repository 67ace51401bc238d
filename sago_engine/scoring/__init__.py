"""Pure math over frames: Δ̃, s_X(i), SGS, t-tests, intervals, paired tests, rank correlation, agreement.

Imports only the core records (docs/ARCHITECTURE.md "Layers")."""
