# Segmented reduction with CuABI.jl: sum each segment of a vector on the GPU.
#
#   CUABI_LIBRARY=/path/to/libcuabi.so julia --project=bindings/julia/CuABI \
#       bindings/julia/CuABI/examples/segmented_reduction.jl
#
# Compiles `segred<float, 256>` through a name expression and prints its
# resources and offline occupancy (no GPU needed); with a GPU, launches it on
# [1..12] in 3 segments (-> [10, 26, 42]) and on a large random case.
# CuABI exports nothing but CuABIError (its names would meet CUDA.jl's in one
# session): what an example uses, it imports by name.
using CuABI
using CuABI: Device, Stream, MemoryResource, Buffer, Program, LaunchConfig, compile, launch,
             occupancy, device_count, synchronize

const SRC = """
template <typename T, int BLOCK>
__global__ void segred(const T *in, const int *off, T *out, int segs) {
  __shared__ T part[BLOCK];
  int s = blockIdx.x; if (s >= segs) return;
  T acc = 0;
  for (int i = off[s] + threadIdx.x; i < off[s + 1]; i += BLOCK) acc += in[i];
  part[threadIdx.x] = acc; __syncthreads();
  for (int st = BLOCK / 2; st > 0; st /= 2) {
    if (threadIdx.x < st) part[threadIdx.x] += part[threadIdx.x + st];
    __syncthreads(); }
  if (threadIdx.x == 0) out[s] = part[0];
}
"""
const EXPR = "segred<float, 256>"

function run(d, k, input::Vector{Float32}, off::Vector{Int32})
    segs = length(off) - 1
    r = MemoryResource(:device, d)
    s = Stream(d)
    bin, boff, bout = Buffer(r, sizeof(input)), Buffer(r, sizeof(off)), Buffer(r, 4segs)
    CuABI.copyto_buffer!(bin, input)
    CuABI.copyto_buffer!(boff, off)
    launch(k, LaunchConfig(segs, 256; stream = s), bin, boff, bout, Int32(segs))
    synchronize(s)
    Vector{Float32}(bout)
end

function main()
    p = Program(SRC; name = "segred.cu")
    code = compile(p; name_expressions = [EXPR])
    k = code[EXPR]
    res = CuABI.resources(k)
    println(EXPR, " -> ", CuABI.lowered_name(p, EXPR))
    println("resources (sm_", res.arch, "): ", res.registers, " registers, ", res.shared_static_bytes, " B static shared")
    o = occupancy("sm_$(res.arch)", res, 256)
    println("offline occupancy, 256 threads: ", o.active_blocks_per_sm, " blocks/SM (", CuABI.limiter_name(o.limiter), ")")
    n = try
        device_count()
    catch e
        e isa CuABIError || rethrow()
        println("no CUDA driver: compiled and inspected only, launch skipped")
        return
    end
    n == 0 && (println("no CUDA device: launch skipped"); return)
    d = Device(0)
    println("device 0: ", CuABI.name(d))
    out = run(d, k, Float32.(1:12), Int32[0, 4, 8, 12])
    println("[1..12] in 3 segments -> ", out)
    out == Float32[10, 26, 42] || error("small case wrong")
    x = Ref(0x2545f4914f6cdd1d)              # xorshift: no dependency on Random
    rnd() = (v = x[]; v ⊻= v << 13; v ⊻= v >> 7; v ⊻= v << 17; x[] = v)
    off = Int32[0]
    while off[end] < 2_000_000
        push!(off, min(off[end] + Int32(rnd() % 5001), 2_000_000))
    end
    input = Float32[(rnd() % 1000) / 64 for _ in 1:off[end]]
    got = run(d, k, input, off)
    want = [sum(Float64.(input[off[i]+1:off[i+1]])) for i in 1:length(off)-1]
    bad = count(i -> abs(got[i] - want[i]) > 1e-4 * max(abs(want[i]), 1), eachindex(want))
    println("random: ", length(want), " segments, ", length(input), " elements, ", bad, " mismatches")
    bad == 0 || error("large case wrong")
    println("OK")
end

main()
