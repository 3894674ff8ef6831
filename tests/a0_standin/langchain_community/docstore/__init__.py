"""Stand-in package: `langchain_community.docstore`."""
