class constexpr:
    def __init__(self, value):
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self):
        return f"constexpr[{self.value}]"


class dtype:
    def __init__(self, name):
        self.name = name

    def __eq__(self, o):
        return isinstance(o, dtype) and o.name == self.name

    def __repr__(self):
        return f"triton.language.{self.name}"


float32 = dtype("fp32")
float16 = dtype("fp16")


def program_id(axis):
    return 0


def arange(a, b):
    return list(range(a, b))
