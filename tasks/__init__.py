"""Task families. Importing a family module registers its tasks."""
