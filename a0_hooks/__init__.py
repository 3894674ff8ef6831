"""Everything that knows Agent Zero: settings lookup, the memory-search wrapper and its recall scope,
status for the UI/tool/skill, API handlers and install/uninstall. The only layer that imports A0."""

PLUGIN_NAME = "a0_reranker"
