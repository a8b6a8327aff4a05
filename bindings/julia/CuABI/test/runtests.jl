# Tests of CuABI.jl. Run with `julia --project=bindings/julia/CuABI -e 'using Pkg; Pkg.test()'`
# and libcuabi on the loader path (LD_LIBRARY_PATH) or ENV["CUABI_LIBRARY"]
# set to its path. GPU tests are skipped when no driver or device is found.
using Test
using CuABI
const L = CuABI.LibCuABI

function gpu_available()
    try
        return device_count() > 0
    catch e
        e isa CuABIError || rethrow()
        @info "no CUDA driver: GPU tests skipped" e.message
        return false
    end
end

@testset "CuABI" begin
    @testset "library" begin
        v = CuABI.version()
        @test v isa VersionNumber
        @test CuABI.abi_version() >= 1
        info = runtime_info()
        @test info.library_version == string(v)
        @test info.abi_version == CuABI.abi_version()
    end

    @testset "struct layouts match the library" begin
        for (name, T, fields) in L.STRUCT_LAYOUTS
            @test CuABI.struct_size(name) == sizeof(T)
            @test length(fields) == fieldcount(T)
            for (i, f) in enumerate(fields)
                @test CuABI.struct_field_offset(name, f) == fieldoffset(T, i)
            end
        end
        @test check_layouts() === nothing
    end

    @testset "errors" begin
        err = try
            CuABI.struct_size("cuabi_no_such_struct")
            nothing
        catch e
            e
        end
        @test err isa CuABIError
        @test err.status == L.CUABI_ERROR_NOT_FOUND
        @test err.name == "CUABI_ERROR_NOT_FOUND"
        @test occursin("cuabi_struct_size", err.message)
        @test occursin("CUABI_ERROR_NOT_FOUND", sprint(showerror, err))
        # Handle checks: a NULL handle is an error, never a crash.
        @test L.cuabi_stream_release(C_NULL) == L.CUABI_ERROR_INVALID_HANDLE
        n = Ref{Cint}(0)
        @test L.cuabi_device_ordinal(n, C_NULL) == L.CUABI_ERROR_INVALID_HANDLE
        # Versioned structs: version 0 is refused.
        @test L.cuabi_stream_options_init(Ref{L.cuabi_stream_options}(), 0) == L.CUABI_ERROR_INVALID_VERSION
    end

    @testset "argument packs" begin
        p = ArgPack(DevicePtr(0x1000), Int32(7), 2.5f0, UInt8(1), 3.0)
        @test length(p) == 5
        @test [CuABI.slot_offset(p, i) for i in 0:4] == [0, 8, 12, 16, 24]
        @test CuABI.blob_size(p) == 32
        @test p[1] == reinterpret(UInt8, [Int32(7)])
        p2 = ArgPack("i8, f32")
        p2[0] = Int8(-5)
        @test_throws CuABIError (p2[0] = 1000)
        @test_throws CuABIError ArgPack("i32, nonsense")
    end

    @testset "GPU: devices, streams, events" begin
        if !gpu_available()
            @test_skip "no GPU"
        else
            d = Device(0)
            @test CuABI.ordinal(d) == 0
            @test !isempty(CuABI.name(d))
            free, total = CuABI.memory_info(d)
            @test 0 < free <= total
            s = Stream(d; nonblocking = true)
            a, b = Event(d), Event(d)
            record(a, s)
            record(b, s)
            synchronize(s)
            @test isready(s)
            @test elapsed_ms(a, b) >= 0
            wait(Stream(d), b)
            close(s)
            @test !isopen(s)
            @test_throws ArgumentError synchronize(s)
        end
    end
end
