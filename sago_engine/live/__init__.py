"""The second front door: a typed prompt probed through the measurement step, the loaded models, the background job, the save as a run."""
