"""Stand-in package for `langchain_core.runnables.config.run_in_executor`."""
