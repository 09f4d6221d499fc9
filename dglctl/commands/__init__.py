"""The CLI's commands, one module per group: graph data, launch, recorded jobs."""
