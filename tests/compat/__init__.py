"""DGL's own distributed tests and examples (dmlc/dgl v1.1.3), ported with only the imports
changed: each module names the file it ports and says what else changed and why."""
