"""loom: collective communication. `import loom.torch` registers the torch.distributed
backend "loom" (see docs/torch.md)."""
