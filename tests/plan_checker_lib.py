"""Small PrimFuncs (4 x float32 = 16 bytes) for the plan checker's tests; real bodies, so that the
checker reads what each one writes from its TIR."""
from tvm.script import ir as I
from tvm.script import tirx as T


@I.ir_module
class Lib:
    @T.prim_func
    def neg(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            B[i] = T.float32(0) - A[i]

    @T.prim_func
    def add1(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            B[i] = A[i] + T.float32(1)

    @T.prim_func
    def mul2(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            B[i] = A[i] * T.float32(2)

    @T.prim_func
    def exp(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            B[i] = T.exp(A[i])

    @T.prim_func
    def add(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
        for i in range(4):
            C[i] = A[i] + B[i]

    @T.prim_func
    def inc(A: T.Buffer((4,), "float32")):
        for i in range(4):
            A[i] = A[i] + T.float32(1)

    @T.prim_func
    def sym_neg(a: T.handle, b: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        for i in range(n):
            B[i] = T.float32(0) - A[i]

    @T.prim_func
    def opaque(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        T.evaluate(0)


neg = Lib.get_global_var("neg")
add1 = Lib.get_global_var("add1")
mul2 = Lib.get_global_var("mul2")
add = Lib.get_global_var("add")
exp = Lib.get_global_var("exp")
inc = Lib.get_global_var("inc")
opaque = Lib.get_global_var("opaque")
sym_neg = Lib.get_global_var("sym_neg")
