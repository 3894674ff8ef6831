"""A0 core `tools` package (stand-in); regular for the same reason as `helpers`."""
