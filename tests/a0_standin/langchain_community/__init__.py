"""Stand-in for the `langchain_community` (0.3.19) FAISS store and in-memory docstore."""
