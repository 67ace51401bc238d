"""The rewriters behind structural variants: the Rewriter protocol, the offline length and mood rules, the LLM rewriter."""
