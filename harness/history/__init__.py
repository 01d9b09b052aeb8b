"""History over commits: asv runs, their progress lines, the pages, change points and their causes."""
