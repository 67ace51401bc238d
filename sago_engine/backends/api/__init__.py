"""The API backends (openai, openai_compatible, anthropic, gemini) and their provider plumbing: keys, errors, retries, replies, log-probs, server limits."""
