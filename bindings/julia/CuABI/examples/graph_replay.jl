# CUDA graphs with CuABI.jl: the segmented reduction of 64 batches captured
# once from ordinary launches and replayed.
#
#   CUABI_LIBRARY=/path/to/libcuabi.so julia --project=bindings/julia/CuABI \
#       bindings/julia/CuABI/examples/graph_replay.jl
#
# Without a GPU it compiles the kernel and says the rest is skipped.
# CuABI exports nothing but CuABIError (its names would meet CUDA.jl's in one
# session): what an example uses, it imports by name.
using CuABI
using CuABI: Device, Stream, DevicePtr, MemoryResource, Buffer, Program, LaunchConfig, compile,
             launch, capture, instantiate, device_count, synchronize

const SRC = """
template <typename T, int BLOCK>
__global__ void segred(const T *in, T *out, const int *offsets) {
  __shared__ T part[BLOCK];
  int s = blockIdx.x, t = threadIdx.x;
  T acc = 0;
  for (int i = offsets[s] + t; i < offsets[s + 1]; i += BLOCK) acc += in[i];
  part[t] = acc; __syncthreads();
  for (int w = BLOCK / 2; w > 0; w /= 2) { if (t < w) part[t] += part[t + w]; __syncthreads(); }
  if (t == 0) out[s] = part[0];
}
"""
const EXPR = "segred<float, 128>"
const BATCHES, SEGS, SEG_LEN = 64, 8, 100

function main()
    gpus = try
        device_count()
    catch e
        e isa CuABIError || rethrow()
        0
    end
    if gpus == 0
        compile(Program(SRC; name = "segred.cu"); arch = "sm_90", name_expressions = [EXPR])
        println("$EXPR compiled; no GPU, so capture and replay are skipped")
        return
    end
    d = Device(0)
    k = compile(Program(SRC; name = "segred.cu"); name_expressions = [EXPR])[EXPR]
    r = MemoryResource(:device, d)
    s = Stream(d)
    input = Float32.((0:BATCHES * SEGS * SEG_LEN - 1) .% 10)
    offsets = Int32.((0:SEGS) .* SEG_LEN)
    bin, boff, bout = Buffer(r, sizeof(input)), Buffer(r, sizeof(offsets)), Buffer(r, 4 * BATCHES * SEGS)
    CuABI.copyto_buffer!(bin, input)
    CuABI.copyto_buffer!(boff, offsets)
    pin, pout = UInt64(CuABI.pointer_address(bin)), UInt64(CuABI.pointer_address(bout))
    cfg = LaunchConfig(SEGS, 128; stream = s)
    # Capture: the 64 launches are recorded, not run.
    graph = capture(s) do
        for b in 0:BATCHES-1
            launch(k, cfg, DevicePtr(pin + 4 * b * SEGS * SEG_LEN), DevicePtr(pout + 4 * b * SEGS), boff)
        end
    end
    exe = instantiate(graph)
    for _ in 1:10
        launch(exe, s)          # one call runs all 64 kernels
    end
    synchronize(s)
    out = Vector{Float32}(bout)
    println("captured $(length(graph)) launches, replayed 10 times; all segments sum to 450: ",
            all(==(450f0), out))
end

main()
