"""Public helpers other plugins import (A0 convention: ``usr.plugins.<name>.helpers``)."""
