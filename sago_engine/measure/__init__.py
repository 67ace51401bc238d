"""One measurement step (screen → prepare → generate → score), the rows it builds, the noise floor and the judge.

Used by the runner and the Live page alike."""
