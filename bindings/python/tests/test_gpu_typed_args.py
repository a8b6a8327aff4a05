"""On a GPU (skipped without one): arguments reach kernels as their values,
typed from the kernel's PTX or mangled name (issue 17), and launch(None, ...)
runs on the current device's legacy default stream (issue 12)."""
import numpy as np
import pytest

import cuabi

SRC = r'''
extern "C" __global__ void typed(float *out, int n, double d, float f, unsigned u) {
    out[0] = n; out[1] = (float)d; out[2] = f; out[3] = (float)u;
}
template <typename T> __global__ void typedt(T *out, T d, int n) { out[0] = d; out[1] = n; }
'''


@pytest.fixture(scope="module")
def code(gpu):
    return cuabi.Program(SRC).compile(arch=gpu.arch, name_expressions=["typedt<double>"])


def test_values_arrive_as_themselves(gpu, code):
    k = code.get_kernel("typed")
    out = cuabi.Buffer(16)
    # Python ints into float/double parameters are converted, never reinterpreted.
    cuabi.launch(None, cuabi.LaunchConfig(), k, out, 3, 2, 1, 4000000000)
    gpu.synchronize()
    host = np.zeros(4, np.float32)
    out.copy_to(host)
    np.testing.assert_array_equal(host, [3, 2, 1, 4e9])
    with pytest.raises(TypeError, match=r"argument 1 \(.u32\).*float is refused"):
        cuabi.launch(None, cuabi.LaunchConfig(), k, out, 3.7, 2.0, 1.0, 0)
    out.close()


def test_template_types_from_the_name(gpu, code):
    k = code.get_kernel("typedt<double>")
    assert k.signature == "double*, double, int"
    out = cuabi.Buffer(16)
    with gpu.create_stream(non_blocking=False) as s:
        cuabi.launch(s, cuabi.LaunchConfig(), k, out, 2, np.int64(-5))
        host = np.zeros(2, np.float64)
        out.copy_to(host, stream=s)
        s.synchronize()
    np.testing.assert_array_equal(host, [2.0, -5.0])
    with pytest.raises(TypeError, match=r"argument 2 \(int\)"):
        cuabi.launch(None, cuabi.LaunchConfig(), k, out, 2.0, 1.5)
    out.close()


def test_launch_none_uses_the_current_device(gpu, code):
    gpu.set_current()
    k = code.get_kernel("typed")
    out = cuabi.Buffer(16)
    prep = cuabi.prepare(k, cuabi.LaunchConfig(), None, out, 7, 0.5, 0.25, 1)
    prep()
    gpu.synchronize()
    host = np.zeros(4, np.float32)
    out.copy_to(host)
    np.testing.assert_array_equal(host, [7, 0.5, 0.25, 1])
    prep.close()
    out.close()
