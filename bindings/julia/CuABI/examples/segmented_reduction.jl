# Segmented reduction with CuABI.jl: sum each segment of a vector on the GPU.
#
#   CUABI_LIBRARY=/path/to/libcuabi.so julia --project=bindings/julia/CuABI \
#       bindings/julia/CuABI/examples/segmented_reduction.jl
#
# Needs a GPU; prints what it skipped otherwise.
using CuABI

function main()
    n = try
        device_count()
    catch e
        e isa CuABIError || rethrow()
        println("no CUDA driver: ", e.message)
        return
    end
    if n == 0
        println("no CUDA device")
        return
    end
    d = Device(0)
    println("device 0: ", CuABI.name(d))
    s = Stream(d)
    start, stop = Event(d), Event(d)
    record(start, s)
    # The kernel, compile and launch steps arrive with the program and
    # launch modules (see docs/julia.md for the state of the bindings).
    record(stop, s)
    synchronize(stop)
    println("empty stream round trip: ", elapsed_ms(start, stop), " ms")
end

main()
