#!/usr/bin/env python3
"""Blur an image through a texture: a numpy RGBA image becomes a texture in
one call (TextureObject.from_image), read as normalized floats with linear
filtering, and a kernel makes the 3x3 binomial blur ([1 2 1] x [1 2 1] / 16)
from four bilinear samples at the corners of each pixel -- the texture unit
averages each 2x2 block for free. The result is checked against numpy.

    python3 examples/python/texture_blur.py [image.npy]

Needs a GPU (exits 0 saying so without one) and NVRTC. Runs from any
directory of a source checkout built in build/ (see _cuabi_path.py).
"""
import sys

import numpy as np

import _cuabi_path  # noqa: F401  (finds bindings/python and build/.libs)
import cuabi
from cuabi.texture import FilterMode, ReadMode, TextureDescriptor, TextureObject

SOURCE = r"""
extern "C" __global__ void blur(cudaTextureObject_t img, uchar4 *out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    // Texel (x, y) is centred at (x + 0.5, y + 0.5): its corners lie between
    // it and its neighbours, where one bilinear sample averages four texels.
    float4 a = tex2D<float4>(img, x, y), b = tex2D<float4>(img, x + 1.0f, y);
    float4 c = tex2D<float4>(img, x, y + 1.0f), d = tex2D<float4>(img, x + 1.0f, y + 1.0f);
    float4 s = make_float4((a.x + b.x + c.x + d.x) * 0.25f, (a.y + b.y + c.y + d.y) * 0.25f,
                           (a.z + b.z + c.z + d.z) * 0.25f, (a.w + b.w + c.w + d.w) * 0.25f);
    out[y * w + x] = make_uchar4(__float2int_rn(s.x * 255.0f), __float2int_rn(s.y * 255.0f),
                                 __float2int_rn(s.z * 255.0f), __float2int_rn(s.w * 255.0f));
}
"""


def test_image(h=240, w=320):
    """A synthetic RGBA image: gradients, rings and a checkerboard."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    r = np.hypot(x - w / 2, y - h / 2)
    img = np.stack([x / w * 255, y / h * 255, (np.sin(r / 6) * 0.5 + 0.5) * 255,
                    ((x // 16 + y // 16) % 2) * 255], axis=-1)
    return img.round().astype(np.uint8)


def blur_on_host(img):
    """The same blur in numpy, the edges clamped as the texture clamps them."""
    f = img.astype(np.float64)
    p = np.pad(f, ((1, 1), (1, 1), (0, 0)), mode="edge")
    k = np.array([1, 2, 1], np.float64)
    out = sum(k[i] * k[j] * p[i:i + img.shape[0], j:j + img.shape[1]]
              for i in range(3) for j in range(3)) / 16
    return out


def main():
    if cuabi.runtime_info()["nvrtc_status"] != 0:
        print("NVRTC is not available:", cuabi.runtime_info()["nvrtc_error"])
        return
    try:
        n = cuabi.device_count()
    except cuabi.CuabiError as e:
        n, why = 0, e.message
    else:
        why = "no GPU"
    if n == 0:
        print(f"texture_blur needs a GPU ({why}); nothing to do")
        return
    img = np.load(sys.argv[1]) if len(sys.argv) > 1 else test_image()
    if img.ndim != 3 or img.shape[2] != 4 or img.dtype != np.uint8:
        raise SystemExit("give an H x W x 4 uint8 (RGBA) image")
    h, w = img.shape[:2]
    dev = cuabi.Device(0)
    kernel = cuabi.Program(SOURCE).compile(arch=dev.arch).get_kernel("blur")
    tex = TextureObject.from_image(img, TextureDescriptor(filter_mode=FilterMode.LINEAR,
                                                          read_mode=ReadMode.NORMALIZED_FLOAT))
    with dev.create_stream(non_blocking=False) as s:
        out = cuabi.Buffer(h * w * 4, stream=s)
        cfg = cuabi.LaunchConfig(grid=((w + 15) // 16, (h + 15) // 16), block=(16, 16))
        cuabi.launch(s, cfg, kernel, tex, out, np.int32(w), np.int32(h))
        blurred = np.frombuffer(out.to_bytes(stream=s), np.uint8)
        s.synchronize()
    blurred = blurred.reshape(h, w, 4)
    err = np.abs(blurred.astype(np.float64) - blur_on_host(img)).max()
    # Linear filtering weighs with 8-bit fractions: 0.5 is exact, so the
    # difference is the final rounding to 8 bits.
    print(f"blurred a {w}x{h} RGBA image through a {tex.array.format.name} x"
          f"{tex.array.num_channels} texture; largest difference from numpy: {err:.3f} "
          f"(of 255)")
    if err > 1.0:
        raise SystemExit("the texture blur differs from numpy's")


if __name__ == "__main__":
    main()
