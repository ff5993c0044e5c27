"""phases_train.py on a PyTorch that lacks private APIs the layer uses:
register_module_forward_hook without always_call (PyTorch 2.0's
signature), and with "no_quiet" also without torch._C.DisableTorchFunction
(which only torch._dynamo names, imported before it goes).  Prints the number of global
module hooks left registered after the run: the program's own, none."""
import json
import pathlib
import runpy
import sys

import torch
from torch.nn.modules import module

real_register = module.register_module_forward_hook


def register_module_forward_hook(hook):  # PyTorch 2.0's: no always_call
    return real_register(hook)


module.register_module_forward_hook = register_module_forward_hook
if sys.argv[1:] == ["no_quiet"]:
    import torch._dynamo  # noqa: F401 (it names it at import; AdamW imports it)
    del torch._C.DisableTorchFunction
sys.argv = [sys.argv[0]]
runpy.run_path(str(pathlib.Path(__file__).with_name("phases_train.py")), run_name="__main__")
print("TORCH " + json.dumps({"max_reserved": torch.cuda.max_memory_reserved(),
                             "pre_hooks": len(module._global_forward_pre_hooks),
                             "hooks": len(module._global_forward_hooks)}, sort_keys=True))
