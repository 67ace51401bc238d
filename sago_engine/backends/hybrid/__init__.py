"""The hybrid backend: replies from an OpenAI-compatible server, white-box statistics from a local teacher-forced copy (docs/SCALING.md)."""
