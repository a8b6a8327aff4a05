# Tests of CuABI.jl. Run with `julia --project=bindings/julia/CuABI -e 'using Pkg; Pkg.test()'`
# and libcuabi on the loader path (LD_LIBRARY_PATH) or ENV["CUABI_LIBRARY"]
# set to its path. GPU tests are skipped when no driver or device is found.
using Test
using CuABI
# CuABI exports only CuABIError; everything else is imported by name (its
# Device, Stream, launch, synchronize, ... would meet CUDA.jl's otherwise).
using CuABI: Device, Stream, Event, ArgPack, DevicePtr, device_count, runtime_info, synchronize, record,
             elapsed_ms, check_layouts, MemoryResource, Buffer, View, Linker, Program, LaunchConfig,
             PreparedLaunch, compile, launch, occupancy, to_dlpack, from_dlpack, unsafe_array, param_types,
             signature, AccessPolicyWindow, TensorMap, tensormap_bytes, Graph, capture, capture_status,
             instantiate, update_kernel!, add_kernel!, add_memset!, add_memcpy!, add_host!, add_while!,
             conditional_handle, pack_fatbin, fatbin_archs, fatbin_images, fatbin_packer, extract,
             OpaqueArray, MipmappedArray, TextureObject, SurfaceObject, level, object, texture_image,
             wait_value!, write_value!, batch_mem_op!, Communicator, nccl_version, nccl_unique_id,
             nccl_init_all, rank, device, get_async_error, group, Allreduce!, Allgather!
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
        for lib in (info.driver, info.nvrtc, info.nvjitlink, info.nvvm, info.nvfatbin)
            @test lib.status === nothing ? !isempty(lib.path) : !isempty(lib.status.message)
        end
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

    @testset "names and the library (issue 28)" begin
        # Nothing CUDA.jl also exports: only the error type.
        @test setdiff(names(CuABI), [:CuABI]) == [:CuABIError]
        for n in (:Device, :Stream, :Graph, :launch, :compile, :synchronize, :capture)
            @test !Base.isexported(CuABI, n)
        end
        # The library was located at run time (__init__), under its soname.
        @test L.libcuabi == "libcuabi.so.$(L.CUABI_API_TABLE_VERSION)"
        @test endswith(CuABI.library_path(), ".so") || occursin(".so.", CuABI.library_path())
        if haskey(ENV, "CUABI_LIBRARY")
            @test realpath(CuABI.library_path()) == realpath(ENV["CUABI_LIBRARY"])
        end
    end

    @testset "argument packs: 1-based, C slots by name (issue 28)" begin
        p = ArgPack(DevicePtr(0x1000), Int32(7), 2.5f0, UInt8(1), 3.0)
        @test length(p) == 5
        @test [CuABI.slot_offset(p, i) for i in 1:5] == [0, 8, 12, 16, 24]
        @test CuABI.blob_size(p) == 32
        @test p[2] == reinterpret(UInt8, [Int32(7)])
        @test CuABI.get_c_slot(p, 1) == p[2]
        @test p[end] == reinterpret(UInt8, [3.0])
        @test_throws BoundsError p[0]
        @test_throws BoundsError p[6]
        p2 = ArgPack("i8, f32")
        p2[1] = Int8(-5)
        @test p2[1] == UInt8[0xfb]
        CuABI.set_c_slot!(p2, 1, 2.5f0)
        @test p2[2] == reinterpret(UInt8, [2.5f0])
        @test_throws CuABIError (p2[1] = 1000)
        @test_throws BoundsError (p2[0] = 1)
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
            wait(Stream(d), s)     # a stream waits for another's work so far
            close(s)
            @test !isopen(s)
            @test_throws ArgumentError synchronize(s)
        end
    end

    @testset "host buffers and views" begin
        r = MemoryResource(:host)
        b = Buffer(r, 64)
        @test sizeof(b) == 64
        @test CuABI.kind(b) == L.CUABI_MEMORY_HOST
        CuABI.copyto_buffer!(b, Float32.(1:16))
        @test Vector{Float32}(b) == Float32.(1:16)
        c = Buffer(r, 64)
        CuABI.memset!(c, 0xab)
        @test all(==(0xab), Vector{UInt8}(c))
        copyto!(c, 8, b, 0, 16)
        @test Vector{Float32}(c)[3:6] == Float32[1, 2, 3, 4]
        @test_throws CuABIError CuABI.copyfrom_buffer!(zeros(UInt8, 65), c)

        a = collect(Int32(0):Int32(11))
        wb = Buffer(a)                          # shares a's memory
        v = View(wb, Int32, (4, 3))             # Julia order: a 4x3 column-major matrix
        i = CuABI.info(v)                       # the C description: row-major (3, 4)
        @test i.shape == [3, 4] && i.strides == [4, 1] && i.eltype == Int32
        @test size(v) == (4, 3) && strides(v) == (1, 4) && length(v) == 12 && ndims(v) == 2
        @test CuABI.is_c_contiguous(v) && !CuABI.is_f_contiguous(v)
        @test collect(v) == reshape(a, 4, 3)
        # size, collect and unsafe_array agree (issue 28 item 7)
        GC.@preserve v begin
            arr = unsafe_array(v)
            @test arr isa Array && size(arr) == size(v) && arr == collect(v)
        end
        # 1-based inclusive ranges in the order of size(v)
        sv = CuABI.slice(v, 2:3, 1:2:3)          # rows 2..3, columns 1 and 3
        @test size(sv) == (2, 2)
        @test collect(sv) == reshape(a, 4, 3)[2:3, 1:2:3]
        @test !CuABI.is_c_contiguous(sv)
        @test_throws ArgumentError unsafe_array(sv)
        @test collect(CuABI.slice(v, 4:-1:1, :)) == reshape(a, 4, 3)[4:-1:1, :]
        @test collect(CuABI.slice(v, 3, 2)) == reshape([a[7]], 1, 1)
        @test size(CuABI.slice(v, 3:2, :)) == (0, 3)
        @test_throws BoundsError CuABI.slice(v, 0:2, :)
        @test_throws BoundsError CuABI.slice(v, 1:5, :)
        @test_throws ArgumentError CuABI.slice(v, 1:2)
        # a view with Julia strides: the transpose, dense the other way round
        t = View(wb, Int32, (3, 4); strides = (4, 1))
        @test size(t) == (3, 4) && CuABI.is_f_contiguous(t)
        @test collect(t) == permutedims(reshape(a, 4, 3))
        GC.@preserve t begin
            pt = unsafe_array(t)                # a PermutedDimsArray of the same memory
            @test size(pt) == (3, 4) && pt == collect(t)
        end
        @test_throws CuABIError View(wb, Int32, (5, 3))

        # GC safety (issue 28 item 6): the view keeps the array rooted after
        # the Buffer object and every Julia reference to the array are gone.
        function lone_view()
            b = Buffer(collect(Float64(1):Float64(1000)))
            View(b, Float64, (10, 100))
        end
        lv = lone_view()
        for _ in 1:3
            GC.gc(true)
        end
        @test collect(lv)[:, end] == Float64.(991:1000)
        # The array is let go exactly when the last C reference goes.
        arr = zeros(4)
        rooted() = CuABI._with_roots(() -> any(x -> x === arr, values(CuABI._ROOTS)))
        b4 = Buffer(arr)
        v4 = View(b4, Float64, (4,))
        @test rooted()
        close(b4)
        @test rooted()                           # the view still reads it
        close(v4)
        @test !rooted()
    end

    @testset "close while calls are in flight (issue 29 item 7)" begin
        # A call in flight (on another thread) holds its handles in use
        # (LibCuABI._enter / _leave): close() marks the object closed at once
        # and leaves the release to the call; before, it released under it.
        r = MemoryResource(:host)
        b = Buffer(r, 64)
        h = b.ptr
        raw_size(p) = (n = Ref{Csize_t}(0); st = L.cuabi_buffer_size(n, p); st)
        t = L._enter(b)
        close(b)
        @test !isopen(b)
        @test_throws ArgumentError sizeof(b)        # new calls: closed at once
        @test raw_size(h) == L.CUABI_SUCCESS         # the C handle is still live
        L._leave(b, t)
        @test raw_size(h) == L.CUABI_ERROR_INVALID_HANDLE   # released by the last call
        close(b)                                     # idempotent

        # From threads: calls on a buffer while it is closed -- only
        # "closed" errors, never a release under a call.
        for _ in 1:50
            c = Buffer(r, 64)
            ts = [Threads.@spawn(for _ in 1:50
                       try
                           sizeof(c); Vector{UInt8}(c)
                       catch e
                           e isa ArgumentError || rethrow()
                       end
                   end) for _ in 1:4]
            close(c)
            foreach(wait, ts)
        end

        # A pack keeps the buffers and views its slots name, and a launch
        # holds them in use.
        p = ArgPack("buffer, i32")
        d = Buffer(r, 16)
        p[1] = d
        @test p.refs[0] === d                    # refs are keyed by C slot
        refs = L._enter(p)
        @test refs == CuABI.Handle[d]
        L._leave(p, refs)
        p[1] = Buffer(r, 16)
        @test p.refs[0] !== d
    end

    @testset "DLPack exchange" begin
        x = Float64[1 2 3; 4 5 6]               # Julia column-major 2x3
        v = View(x)                              # exported as DLPack, imported
        i = CuABI.info(v)                        # DLPack: row-major (3, 2), dense
        @test i.shape == [3, 2] && i.strides == [2, 1]
        @test size(v) == size(x) && CuABI.is_c_contiguous(v)
        @test collect(v) == x
        GC.@preserve v begin
            y = unsafe_array(v)                  # shares x's memory
            @test y == x
            y[1, 1] = 42.0
        end
        @test x[1, 1] == 42.0
        t = to_dlpack(v)                         # export, import again
        v2 = from_dlpack(t)
        @test collect(v2) == x
        close(v); close(v2)
        CuABI.dlpack_delete(to_dlpack(View(zeros(Int16, 3))))
        ro = View(zeros(UInt8, 4); readonly = true)
        @test_throws CuABIError CuABI.to_dlpack_legacy(ro)
        lt = CuABI.to_dlpack_legacy(View(Float32[1, 2, 3]))
        @test collect(from_dlpack(lt)) == Float32[1, 2, 3]
    end

    segred = """
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
    expr = "segred<float, 256>"

    @testset "compile, kernels, offline occupancy" begin
        p = Program(segred; name = "segred.cu")
        code = compile(p; arch = "sm_90", name_expressions = [expr])
        low = CuABI.lowered_name(p, expr)
        @test startswith(low, "_Z")
        @test CuABI.kernel_names(code) == [low]
        @test CuABI.arch(code) == 90
        k = code[expr]
        @test CuABI.name(k) == low
        @test CuABI.param_count(k) == 4
        @test CuABI.param_info(k, 4) == (24, 4)      # the 4th parameter (1-based)
        r = CuABI.resources(k)
        @test r.shared_static_bytes == 1024 && r.registers > 0
        o = occupancy("sm_90", r, 256)
        @test 1 <= o.active_blocks_per_sm <= 8
        @test !isempty(CuABI.limiter_name(o.limiter))
        seen = Int[]
        b = CuABI.max_potential_block_size("sm_90", r; smem = bs -> (push!(seen, bs); 4bs))
        @test b.block_size > 0 && !isempty(seen)
        @test_throws DomainError CuABI.max_potential_block_size("sm_90", r; smem = bs -> throw(DomainError(bs)))
        @test CuABI.arch_limits("sm_90").warp_size == 32
        bad = Program("__global__ void k() { nope(); }"; name = "bad.cu")
        err = try compile(bad; arch = "sm_90"); nothing catch e; e end
        @test err isa CuABIError && err.status == L.CUABI_ERROR_COMPILE
        @test occursin("nope", err.log * err.message)
        @test_throws CuABIError code["missing"]
        # issue 17: parameter types from the mangled name; a typed pack refuses
        # a float for the int parameter instead of reinterpreting its bits
        @test signature(k) == "float const*, int const*, float*, int"
        t = param_types(k)
        @test t[4].kind == L.CUABI_ARG_I32 && t[4].source == L.CUABI_PARAM_FROM_NAME
        pk = ArgPack(k, DevicePtr(0), DevicePtr(0), DevicePtr(0), Int32(3))
        @test reinterpret(Int32, pk[4])[1] == 3
        @test_throws ArgumentError ArgPack(k, DevicePtr(0), DevicePtr(0), DevicePtr(0), 3.7)
        @test_throws ArgumentError ArgPack(k, DevicePtr(0))
        # issue 16: a fatbin for several architectures, answered per architecture
        fat = compile(Program(segred; name = "segred.cu"); arch = ["sm_80", "sm_90", "compute_90"],
                      output = L.CUABI_CODE_FATBIN, name_expressions = [expr], cache = false)
        @test fatbin_archs(fat) == [80, 90]
        @test length(fatbin_images(fat)) == 3
        @test fatbin_packer(fat) in ("nvfatbin", "fatbinary")
        @test CuABI.resources(fat, expr; arch = "sm_80").arch == 80
        @test CuABI.arch(extract(fat, "sm_90")) == 90
        @test fatbin_archs(pack_fatbin([extract(fat, "sm_80")])) == [80]
        @test_throws CuABIError extract(fat, "sm_75")
        c = compile(Program("extern \"C\" __global__ void k(float *p, double a) {}"; name = "c.cu");
                    arch = "sm_90")
        kc = c["k"]
        @test signature(kc) == ".u64, .f64"
        pc = ArgPack(kc, DevicePtr(0), 2)            # an Int for a double: 2.0, exactly
        @test reinterpret(Float64, pc[2])[1] == 2.0
    end

    @testset "link two LTO-IR units" begin
        a = compile(Program("extern __device__ float twice(float);\n" *
                            "extern \"C\" __global__ void scale(float *x) { x[threadIdx.x] = twice(x[threadIdx.x]); }\n");
                    arch = "sm_90", output = L.CUABI_CODE_LTOIR, relocatable = true)
        b = compile(Program("__device__ float twice(float v) { return 2.0f * v; }\n");
                    arch = "sm_90", output = L.CUABI_CODE_LTOIR, relocatable = true)
        l = Linker(; arch = "sm_90", lto = true)
        push!(l, a)
        CuABI.add_data!(l, Vector{UInt8}(b); name = "b.ltoir")
        out = CuABI.complete(l)
        @test CuABI.kernel_names(out) == ["scale"]
        l2 = Linker(; arch = "sm_90", lto = true)
        push!(l2, a)
        @test_throws CuABIError CuABI.complete(l2)
    end

    @testset "compile cache and precompile" begin
        dir = mktempdir()
        CuABI.Cache.set_directory(dir)
        CuABI.Cache.set_enabled(true)
        @test CuABI.Cache.directory() == dir
        src = "extern \"C\" __global__ void jl_cache_k(int *o) { *o = 1; }\n"
        p = Program(src)
        compile(p; arch = "sm_90"); @test CuABI.cache_hit(p) == 0
        compile(p; arch = "sm_90"); @test CuABI.cache_hit(p) == 1
        @test CuABI.Cache.stats().entries >= 1
        ptx = Vector{UInt8}(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry jk() { ret; }\n")
        for (cache, want) in ((true, 0), (true, 1), (false, 0))
            l = Linker(; arch = "sm_90", cache = cache)
            CuABI.add_data!(l, ptx; type = L.CUABI_CODE_PTX, name = "jk.ptx")
            CuABI.complete(l)
            @test CuABI.cache_hit(l) == want
        end
        events = []
        CuABI.Cache.precompile(["a" => "__global__ void pa() {}", "__global__ void pb() {}"];
                               archs = ["sm_80", "sm_90"], progress = ev -> (push!(events, ev); true))
        @test length(events) == 4 && all(e -> e.total == 4, events)
        @test_throws CuABIError CuABI.Cache.precompile(["__global__ void pc() {}"]; archs = ["sm_90"], progress = ev -> false)
        CuABI.Cache.clear()
        CuABI.Cache.set_directory(nothing)
    end

    @testset "GPU: segmented reduction, prepared launch" begin
        if !gpu_available()
            @test_skip "no GPU"
        else
            d = Device(0)
            k = compile(Program(segred); name_expressions = [expr])[expr]
            r = MemoryResource(:device, d)
            s = Stream(d)
            bin, boff, bout = Buffer(r, 48), Buffer(r, 16), Buffer(r, 12)
            CuABI.copyto_buffer!(bin, Float32.(1:12))
            CuABI.copyto_buffer!(boff, Int32[0, 4, 8, 12])
            launch(k, LaunchConfig(3, 256; stream = s), bin, boff, bout, Int32(3))
            synchronize(s)
            @test Vector{Float32}(bout) == Float32[10, 26, 42]
            vout = View(bout, Float32, (3,))
            CuABI.memset!(bout, 0; width = 4)
            pl = PreparedLaunch(k, ArgPack(View(bin, Float32, (12,)), boff, vout, Int32(3)), LaunchConfig(3, 256; device = d))
            launch(pl)
            synchronize(d)
            @test Vector{Float32}(bout) == Float32[10, 26, 42]
            o = occupancy(k, d, 256)
            @test o.active_blocks_per_sm >= 1
            @test CuABI.max_potential_block_size(k, d; smem = bs -> 0).block_size > 0
            @test_throws CuABIError launch(k, LaunchConfig(3, 4096; device = d), bin, boff, bout, Int32(3))
        end
    end

    @testset "launch attributes" begin
        @test LaunchConfig(4, 128).attributes === nothing
        w = AccessPolicyWindow(0x7000_0000, 4096; hit_ratio = 0.5, miss_prop = :normal)
        c = LaunchConfig(8, 64; cluster = (2, 1, 1), programmatic_stream_serialization = true, priority = -2,
                         access_policy_window = w, preferred_cluster = 4, cluster_scheduling_policy = :spread,
                         mem_sync_domain = :remote, mem_sync_domain_map = (0, 1),
                         preferred_shared_memory_carveout = 50, nvlink_util_centric_scheduling = true)
        a = CuABI._attributes(c.attributes)
        @test a.preferred_cluster == (4, 1, 1)
        @test a.cluster_scheduling_policy == L.CUABI_CLUSTER_SCHEDULING_SPREAD
        @test a.programmatic_stream_serialization == 1 && a.priority == -2
        @test (a.access_policy_base, a.access_policy_bytes, a.access_policy_hit_ratio) == (0x7000_0000, 4096, 0.5f0)
        @test a.access_policy_miss_property == L.CUABI_ACCESS_PROPERTY_NORMAL
        @test a.mem_sync_domain == 1 && a.mem_sync_domain_map == (0, 1)
        @test a.preferred_shared_memory_carveout == 50 && a.nvlink_util_centric_scheduling == 1
        u = CuABI._attributes(LaunchConfig(1, 1; priority = 0).attributes)
        @test u.priority == 0 && u.mem_sync_domain == L.CUABI_LAUNCH_UNSET
        @test_throws ArgumentError LaunchConfig(1, 1; cluster_scheduling_policy = :round_robin)
        @test_throws ArgumentError LaunchConfig(1, 1; mem_sync_domain = :far)
    end

    @testset "GPU: tensor maps and programmatic dependent launch" begin
        if !gpu_available() || CuABI.properties(Device(0)).compute_capability_major < 9
            @test_skip "needs a GPU of compute capability 9.0"
        else
            d = Device(0)
            r = MemoryResource(:device, d)
            tma = """
            struct __align__(64) TmaMap { unsigned long long q[16]; };
            extern "C" __global__ void tile(const __grid_constant__ TmaMap map, float *out) {
              __shared__ __align__(128) float t[16 * 32];
              __shared__ __align__(8) unsigned long long bar;
              unsigned b = (unsigned)__cvta_generic_to_shared(&bar), s = (unsigned)__cvta_generic_to_shared(t);
              if (threadIdx.x == 0) {
                asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b));
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
              }
              __syncthreads();
              if (threadIdx.x == 0) {
                asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(2048u) : "memory");
                asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                             :: "r"(s), "l"((unsigned long long)&map), "r"(0), "r"(0), "r"(b) : "memory");
              }
              unsigned done = 0;
              while (!done)
                asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                             : "=r"(done) : "r"(b) : "memory");
              for (int i = threadIdx.x; i < 16 * 32; i += blockDim.x) out[i] = t[i];
            }
            """
            k = compile(Program(tma))["tile"]
            host = Float32.(0:(64 * 96 - 1))
            buf = Buffer(r, sizeof(host))
            CuABI.copyto_buffer!(buf, host)
            # 88 columns of 62 rows (Julia order) out of a 96-wide row-major array
            v = View(buf, Float32, (88, 62); offset = (2 * 96 + 8) * 4, strides = (1, 96))
            m = TensorMap(v, (32, 16))                   # the box in Julia order too
            @test CuABI.info(m).shape == [62, 88] && CuABI.info(m).box == [16, 32]
            @test length(tensormap_bytes(m)) == 128
            out = Buffer(r, 16 * 32 * 4)
            s = Stream(d)
            launch(k, LaunchConfig(1, 128; stream = s), m, out)
            synchronize(s)
            got = Vector{Float32}(out)
            @test all(got[r * 32 + c + 1] == host[(r + 2) * 96 + c + 8 + 1] for r in 0:15, c in 0:31)
            bad = View(buf, Float32, (88, 62); offset = 4, strides = (1, 96))
            err = try TensorMap(bad, (32, 16)); nothing catch e; e end
            @test err isa CuABIError && occursin("16-byte aligned", err.message)
            # PDL: accepted on a stream, the result right
            pdl = LaunchConfig(1, 32; stream = s, programmatic_stream_serialization = true)
            launch(k, pdl, m, out)
            synchronize(s)
            @test Vector{Float32}(out) == got
        end
    end

    @testset "NCCL arguments (no GPU needed)" begin
        @test_throws ArgumentError CuABI._nccl_id(zeros(UInt8, 12))
        @test CuABI._nccl_id(zeros(UInt8, 128))[] isa L.cuabi_nccl_unique_id
        @test CuABI._nccl_op(+) == L.CUABI_NCCL_SUM && CuABI._nccl_op(:avg) == L.CUABI_NCCL_AVG
        @test_throws ArgumentError CuABI._nccl_op(:mean)
        @test CuABI._nccl_type(Float32) == L.CUABI_NCCL_FLOAT32
        @test_throws ArgumentError CuABI._nccl_type(ComplexF32)
        @test CuABI._timeout_ms(nothing) == 0 && CuABI._timeout_ms(Inf) == -1 && CuABI._timeout_ms(0.2) == 200
    end

    @testset "GPU: NCCL collectives on two GPUs" begin
        ok = gpu_available() && device_count() >= 2 && try
            nccl_version() >= v"2.19"
        catch e
            e isa CuABIError || rethrow()
            false
        end
        if !ok
            @test_skip "needs two GPUs and NCCL"
        else
            ds = [Device(0), Device(1)]
            cs = nccl_init_all(ds; timeout = 120)
            @test rank.(cs) == [0, 1] && size.(cs) == [2, 2]
            @test CuABI.ordinal.(device.(cs)) == [0, 1]
            ss = [Stream(d) for d in ds]
            n = 1000
            val(r) = Float32.((0:n-1) .% 13 .+ 1 .+ r)
            bufs = [Buffer(MemoryResource(:device, ds[r]), 4n) for r in 1:2]
            gath = [Buffer(MemoryResource(:device, ds[r]), 8n) for r in 1:2]
            ints = [Buffer(MemoryResource(:device, ds[r]), 8n) for r in 1:2]
            for r in 1:2
                CuABI.copyto_buffer!(bufs[r], val(r - 1))
                CuABI.copyto_buffer!(ints[r], fill(Int64(r), n))
            end
            src = [View(bufs[r], Float32, (n,)) for r in 1:2]
            group() do
                for r in 1:2
                    Allgather!(src[r], View(gath[r], Float32, (2n,)), cs[r]; stream = ss[r])
                    Allreduce!(nothing, ints[r], *, cs[r]; T = Int64, count = n, stream = ss[r])
                end
            end
            group() do
                for r in 1:2
                    Allreduce!(src[r], src[r], :sum, cs[r]; stream = ss[r])
                end
            end
            for r in 1:2
                synchronize(cs[r], ss[r])
                @test Vector{Float32}(bufs[r]) == val(0) .+ val(1)
                @test Vector{Float32}(gath[r]) == vcat(val(0), val(1))
                @test all(==(2), Vector{Int64}(ints[r]))
                @test get_async_error(cs[r]) == 0
            end
            strided = View(bufs[1], Float32, (n ÷ 2,); strides = (2,))
            @test_throws CuABIError Allreduce!(nothing, strided, :sum, cs[1]; stream = ss[1])
            e = try
                Communicator(ds[1], 2, nccl_unique_id(), 0; timeout = 3)
            catch err
                err
            end
            @test e isa CuABIError && e.status == L.CUABI_ERROR_TIMEOUT
            foreach(close, cs)
        end
    end

    @testset "graphs without a GPU" begin
        @test_throws ArgumentError CuABI._capture_mode(:sometimes)
        @test CuABI._capture_mode(:relaxed) == L.CUABI_CAPTURE_MODE_RELAXED
        # Handle checks: NULL is an error, never a crash.
        @test L.cuabi_graph_release(C_NULL) == L.CUABI_ERROR_INVALID_HANDLE
        n = Ref{Csize_t}(0)
        @test L.cuabi_graph_node_count(n, C_NULL) == L.CUABI_ERROR_INVALID_HANDLE
        @test L.cuabi_graph_instantiate_options_init(Ref{L.cuabi_graph_instantiate_options}(), 0) ==
              L.CUABI_ERROR_INVALID_VERSION
    end

    @testset "GPU: graphs (capture vs explicit, update, conditional loop)" begin
        if !gpu_available()
            @test_skip "no GPU"
        else
            d = Device(0)
            s = Stream(d)
            k = compile(Program(segred); name_expressions = [expr])[expr]
            r = MemoryResource(:device, d)
            bin, boff = Buffer(r, 48), Buffer(r, 16)
            CuABI.copyto_buffer!(bin, Float32.(1:12))
            CuABI.copyto_buffer!(boff, Int32[0, 4, 8, 12])
            outs = [Buffer(r, 12), Buffer(r, 12)]
            cfg = LaunchConfig(3, 256; stream = s)
            g1 = capture(s) do
                launch(k, cfg, bin, boff, outs[1], Int32(3))
            end
            @test length(g1) == 1 && CuABI.kind(CuABI.node(g1, 1)) == :kernel && CuABI.kind(g1[end]) == :kernel
            g2 = Graph()
            kn = add_kernel!(g2, k, ArgPack(bin, boff, outs[2], Int32(3)), LaunchConfig(3, 256; device = d))
            for g in (g1, g2)
                launch(instantiate(g), s)
            end
            synchronize(s)
            @test Vector{Float32}(outs[1]) == Vector{Float32}(outs[2]) == Float32[10, 26, 42]
            # Update one kernel node in place: two segments only.
            exe = instantiate(g2)
            CuABI.memset!(outs[2], 0; width = 4)
            update_kernel!(exe, kn, ArgPack(bin, boff, outs[2], Int32(2)))
            launch(exe, s)
            synchronize(s)
            @test Vector{Float32}(outs[2]) == Float32[10, 26, 0]
            # A conditional while loop set from device code.
            loop_src = """
            extern "C" __device__ void cudaGraphSetConditional(unsigned long long h, unsigned int v);
            extern "C" __global__ void loop_body(unsigned long long h, int *c, int n) {
              if (threadIdx.x == 0) { int v = ++*c; cudaGraphSetConditional(h, v < n ? 1u : 0u); }
            }
            """
            body_k = compile(Program(loop_src))["loop_body"]
            counter = Buffer(r, 4)
            g = Graph()
            h = try
                conditional_handle(g, d; default = 1)
            catch e
                e isa CuABIError || rethrow()
                nothing
            end
            if h === nothing
                @test_skip "no conditional nodes on this driver"
            else
                z = add_memset!(g, counter, 0; width = 4)
                _, body = add_while!(g, h; deps = (z,))
                add_kernel!(body, body_k, ArgPack(h, counter, Int32(12)), LaunchConfig(1, 32; device = d))
                launch(instantiate(g), s)
                synchronize(s)
                @test Vector{Int32}(counter) == Int32[12]
            end
            @test_throws CuABIError capture(() -> synchronize(s), s)
            @test capture_status(s) == :none

            # Issue 28: releasing an executable waits for its runs, so the host
            # array a copy node writes and the host function it calls are not
            # collected under a run in flight.
            ran = Threads.Atomic{Bool}(false)
            host = zeros(Float32, 3)
            g = Graph()
            slow = add_host!(g) do
                sleep(0.3)
                ran[] = true
            end
            add_memcpy!(g, host, outs[1]; deps = (slow,))
            exe = instantiate(g)
            t0 = time()
            launch(exe, s)
            close(exe)                               # waits for the run
            @test ran[] && time() - t0 >= 0.25
            @test host == Float32[10, 26, 42]
        end
    end

    @testset "finalizers from the GC are safe and idempotent (issue 28)" begin
        # Buffers over arrays and views of them, dropped in every order and
        # collected with finalizers running on whatever thread the GC picks.
        for round in 1:20
            bs = [Buffer(rand(Float32, 64)) for _ in 1:8]
            vs = [View(b, Float32, (8, 8)) for b in bs]
            round % 2 == 0 && foreach(close, bs)
            bs = nothing
            GC.gc(round % 3 == 0)
            @test all(v -> sum(collect(v)) > 0, vs)
            foreach(close, vs)
            foreach(close, vs)                       # idempotent
        end
        GC.gc(true)
        @test true
    end

    @testset "textures without a GPU" begin
        @test_throws ArgumentError CuABI._array_format(Float64)
        @test_throws ArgumentError CuABI._texture_desc(; filter = :cubic)
        d = CuABI._texture_desc(; address = (:wrap, :border), filter = :linear, read = :normalized,
                                normalized = true, border = (1, 0, 0, 1))
        @test d.address_mode == (L.CUABI_TEXTURE_ADDRESS_WRAP, L.CUABI_TEXTURE_ADDRESS_BORDER,
                                 L.CUABI_TEXTURE_ADDRESS_CLAMP)
        @test d.filter_mode == L.CUABI_TEXTURE_FILTER_LINEAR && d.normalized_coords == 1
        @test d.border_color == (1f0, 0f0, 0f0, 1f0)
        @test L.cuabi_texture_release(C_NULL) == L.CUABI_ERROR_INVALID_HANDLE
        @test L.cuabi_array_release(C_NULL) == L.CUABI_ERROR_INVALID_HANDLE
    end

    @testset "GPU: textures, surfaces, stream memory operations" begin
        if !gpu_available()
            @test_skip "no GPU"
        else
            d = Device(0)
            s = Stream(d)
            src = """
            extern "C" __global__ void sample(cudaTextureObject_t t, cudaSurfaceObject_t o, int w, int h) {
              int x = threadIdx.x, y = blockIdx.x;
              if (x < w && y < h) surf2Dwrite(tex2D<float>(t, x + 1.0f, y + 0.5f) * 2.0f, o, x * 4, y);
            }
            """
            k = compile(Program(src))["sample"]
            img = Float32[x + 10 * y for x in 0:15, y in 0:7]       # width 16, height 8
            a = OpaqueArray(d, img)
            @test CuABI.info(a).width == 16 && CuABI.info(a).height == 8
            out = OpaqueArray(d, Float32, (16, 8); surface = true)
            t = TextureObject(a; filter = :linear)
            o = SurfaceObject(out)
            @test object(t) != 0 && object(o) != 0
            p = ArgPack("handle, handle, i32, i32")
            p[1] = t
            p[2] = o
            p[3] = Int32(16)
            p[4] = Int32(8)
            launch(k, p, LaunchConfig(8, 32; stream = s))
            synchronize(s)
            got = zeros(Float32, 16, 8)
            copyto!(got, out)
            # Between texels x and x + 1 (x + 1 clamped at the edge), doubled.
            @test all(got[x + 1, y + 1] == 2 * (img[x + 1, y + 1] + img[min(x + 2, 16), y + 1]) / 2
                      for x in 0:15, y in 0:7)
            r = MemoryResource(:device, d)
            w = Buffer(r, 16)
            write_value!(s, w, 7; offset = 4)
            wait_value!(s, w, 7; offset = 4, condition = :eq)
            batch_mem_op!(s, [(L.CUABI_STREAM_MEM_OP_WRITE_VALUE_64, w, 8, 1 << 40, 0),
                              (L.CUABI_STREAM_MEM_OP_BARRIER, nothing, 0, 0, 0)])
            synchronize(s)
            words = Vector{UInt32}(w)
            @test words[2] == 7 && words[4] == 256
        end
    end
    @testset "NVML (without NVML a clear error)" begin
        n = try
            nvml_device_count()
        catch e
            e isa CuABIError || rethrow()
            @test e.status == L.CUABI_ERROR_NOT_SUPPORTED
            @test occursin("NVML not available", e.message)
            nothing
        end
        if n !== nothing && n > 0
            s = nvml_system_info()
            @test s.device_count == n && !isempty(s.driver_version)
            for i in 0:n-1
                d = nvml_device_info(i)
                @test startswith(d.uuid, "GPU-") && nvml_find(d.uuid) == i
                h = nvml_health(i)
                @test h.memory_total === nothing || h.memory_total > 0
                @test h.temperature_c === nothing || 0 < h.temperature_c < 120
                @test all(p -> p.pid > 0, nvml_processes(i))
                for l in 0:d.nvlink_count-1
                    @test nvml_nvlink(i, l).link == l
                end
                @test nvml_topology(i, i).p2p_read isa L.cuabi_nvml_p2p_status
            end
            if gpu_available()
                o = nvml_from_cuda_ordinal(0)
                @test nvml_cuda_ordinal(o) == 0
                @test nvml_device_info(o).uuid_bytes == collect(CuABI.properties(Device(0)).uuid)
            end
        end
    end
    @testset "GPU: virtual memory, pool statistics, managed memory, batched copies (issue 25)" begin
        if !gpu_available()
            @test_skip "no GPU"
        else
            d = Device(0)
            g = vmm_granularity(d)
            r = vmm_resource(d; reserve_size = 8g)
            b = vmm_buffer(r, g + 1)
            @test sizeof(b) == 2g && vmm_info(b).requested == g + 1
            CuABI.copyto_buffer!(b, fill(0x5a, 2g))
            p = vmm_info(b).address
            vmm_resize!(b, 5g)
            @test vmm_info(b).address == p && vmm_info(b).chunks == 2 && sizeof(b) == 5g
            @test Vector{UInt8}(b)[1:2g] == fill(0x5a, 2g)
            @test_throws CuABIError vmm_resize!(b, 8g + 1)
            s = Stream(d)
            pool = MemoryResource(:pool, d)
            a = Buffer(pool, 1 << 20; stream = s)
            synchronize(s)
            @test pool_attribute(pool, :used_mem_current) == 1 << 20
            set_pool_attribute!(pool, :release_threshold, 0)
            @test startswith(pool_summary(pool), "pool device 0 (owned): reserved")
            m = Buffer(MemoryResource(:managed, d), 1 << 20)
            managed_advise!(m, :read_mostly)
            managed_prefetch!(m, :device, 0; stream = s)
            res = copy_batch!([(m, a)], s)
            synchronize(s)
            @test res.copies == 1 && res.bytes == 1 << 20 && res.path in (:batched, :single)
        end
    end
end
