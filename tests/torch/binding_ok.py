"""Check that this build's tacl_torch imports and registers "tacl"; the
training tests run it once through run_torch.sh, which builds the binding
first."""
import torch.distributed as dist

import tacl_torch

assert "TACL" in getattr(dist.Backend, "_plugins", {}), \
    "tacl_torch imported but did not register the tacl backend"
print(f"tacl_torch from {tacl_torch.__file__}")
