"""The pipeline's stages, one module each; ``run(config)`` is each stage's whole orchestration."""
