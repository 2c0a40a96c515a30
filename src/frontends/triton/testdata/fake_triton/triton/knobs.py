class HookChain:
    def __init__(self):
        self.calls = []

    def add(self, f):
        if f not in self.calls:
            self.calls.append(f)

    def __call__(self, *a, **k):
        for c in self.calls:
            c(*a, **k)


class compilation:
    listener = None


class runtime:
    launch_enter_hook = HookChain()
    jit_post_compile_hook = None


class autotuning:
    listener = None
