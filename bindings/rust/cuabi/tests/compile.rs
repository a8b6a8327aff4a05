//! Compile, link (two LTO-IR units), kernels' resources and offline
//! occupancy: NVRTC and nvJitLink only, no GPU.
use cuabi::{occupancy, sys, LaunchConfig, Linker, LinkerOptions, ObjectCode, Program, ProgramOptions};

const SEGRED: &str = r#"
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
"#;

fn segred() -> (Program, cuabi::ObjectCode) {
    let mut p = Program::new(SEGRED, Some("segred.cu")).unwrap();
    let o = ProgramOptions::new().arch("sm_90").name_expression("segred<float, 256>");
    let code = p.compile(&o).expect("compile");
    (p, code)
}

#[test]
fn compile_with_name_expression() {
    let (p, code) = segred();
    let lowered = p.lowered_name("segred<float, 256>").unwrap();
    assert!(lowered.starts_with("_Z"), "{lowered}");
    assert_eq!(code.lowered_name("segred<float, 256>").unwrap(), lowered);
    assert_eq!(code.code_type(), sys::CUABI_CODE_CUBIN);
    assert_eq!(code.arch(), 90);
    assert!(code.bytes().starts_with(b"\x7fELF"));
    assert_eq!(code.kernel_names(), vec![lowered.clone()]);
    let k = code.kernel("segred<float, 256>").unwrap();
    assert_eq!(k.name(), lowered);
    assert_eq!(k.param_count().unwrap(), 4);
    assert_eq!(k.param_info(3).unwrap(), (24, 4));
    let r = k.resources().unwrap();
    assert_eq!(r.arch, 90);
    assert_eq!(r.shared_static_bytes, 1024);
    assert_eq!(r.param_count, 4);
    assert!(r.registers > 0);
    assert_eq!(code.kernel_resources("segred<float, 256>", None).unwrap().registers, r.registers);
    assert_eq!(k.objcode(), code);
    let e = code.kernel("nope").unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_NOT_FOUND);
    assert!(p.lowered_name("segred<int, 1>").is_err());
    assert!(cuabi::supported_archs().unwrap().contains(&90));
    // Bytes round trip through from_bytes.
    let again = ObjectCode::from_bytes(sys::CUABI_CODE_NONE, code.bytes(), Some("copy")).unwrap();
    assert_eq!(again.code_type(), sys::CUABI_CODE_CUBIN);
}

#[test]
fn compile_error_carries_log() {
    let mut p = Program::new("__global__ void k() { undeclared_thing(); }\n", Some("bad.cu")).unwrap();
    let e = p.compile(&ProgramOptions::new().arch("sm_90")).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_COMPILE);
    assert!(e.log.contains("undeclared_thing") || e.message.contains("undeclared_thing"), "{e}");
    assert!(p.log().contains("bad.cu"));
    // NUL inside options is an error, not a panic.
    let e = p.compile(&ProgramOptions::new().define("A\0B")).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_INVALID_ARGUMENT);
}

#[test]
fn headers_defines_and_ptx_output() {
    let mut p = Program::new("#include \"v.h\"\nextern \"C\" __global__ void k(int *o) { *o = V + W; }\n", None).unwrap();
    let o = ProgramOptions::new().header("v.h", "#define V 40\n").define("W=2").output(sys::CUABI_CODE_PTX);
    let code = p.compile(&o).unwrap();
    assert_eq!(code.code_type(), sys::CUABI_CODE_PTX);
    let ptx = String::from_utf8_lossy(code.bytes()).into_owned();
    assert!(ptx.contains(".entry k"), "{ptx}");
    assert!(ptx.contains("42"));
}

#[test]
fn link_two_lto_units() {
    let lto = |src: &str, name: &str| {
        let mut p = Program::new(src, Some(name)).unwrap();
        let mut o = ProgramOptions::new().arch("sm_90").output(sys::CUABI_CODE_LTOIR);
        o.relocatable = true;
        p.compile(&o).unwrap()
    };
    let a = lto("extern __device__ float twice(float);\n\
                 extern \"C\" __global__ void scale(float *x, int n) {\n\
                   int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = twice(x[i]); }\n", "a.cu");
    let b = lto("__device__ float twice(float v) { return 2.0f * v; }\n", "b.cu");
    assert_eq!(a.code_type(), sys::CUABI_CODE_LTOIR);
    let mut l = Linker::new(&LinkerOptions { arch: Some("sm_90".into()), lto: true, ..Default::default() }).unwrap();
    l.add_objcode(&a).unwrap();
    l.add_data(sys::CUABI_CODE_NONE, b.bytes(), Some("b.ltoir")).unwrap();
    let out = l.complete(sys::CUABI_CODE_CUBIN).unwrap();
    assert_eq!(out.kernel_names(), vec!["scale".to_string()]);
    assert_eq!(out.kernel("scale").unwrap().param_count().unwrap(), 2);

    // Missing definition: a link error with nvJitLink's log.
    let mut l = Linker::new(&LinkerOptions { arch: Some("sm_90".into()), lto: true, ..Default::default() }).unwrap();
    l.add_objcode(&a).unwrap();
    let e = l.complete(sys::CUABI_CODE_CUBIN).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_LINK, "{e}");
    assert!(format!("{e}").contains("twice") || l.error_log().contains("twice"), "{e}");
}

#[test]
fn offline_occupancy() {
    let (_p, code) = segred();
    let r = code.kernel("segred<float, 256>").unwrap().resources().unwrap();
    let lim = occupancy::arch_limits("sm_90").unwrap();
    assert_eq!(lim.arch, 90);
    assert_eq!(lim.warp_size, 32);
    assert!(occupancy::all_arch_limits().unwrap().iter().any(|l| l.arch == 90));
    assert!(occupancy::arch_limits("sm_1").is_err());
    let o = occupancy::offline::max_active_blocks("sm_90", &r, 256, 0, None).unwrap();
    assert!(o.active_blocks_per_sm >= 1 && o.active_blocks_per_sm <= 8, "{o:?}");
    assert_eq!(o.active_warps_per_sm, o.active_blocks_per_sm * 8);
    assert!(!occupancy::limiter_name(o.limiter).is_empty());
    let b = occupancy::offline::max_potential_block_size("sm_90", &r, None, 0, 0, None).unwrap();
    assert!(b.block_size >= 32 && b.block_size % 32 == 0 && b.min_grid_size > 0, "{b:?}");
    // The shared-memory closure is called with block sizes and can capture state.
    let mut calls = Vec::new();
    let mut f = |bs: i32| { calls.push(bs); bs as usize * 64 };
    let b2 = occupancy::offline::max_potential_block_size("sm_90", &r, Some(&mut f), 0, 1024, None).unwrap();
    assert!(!calls.is_empty() && calls.iter().all(|&c| c > 0 && c <= 1024));
    assert!(b2.block_size > 0);
    let smem = occupancy::offline::available_dynamic_smem("sm_90", &r, 2, 256, None).unwrap();
    assert!(smem > 0);
    let opts = cuabi::OccupancyOptions { sm_count: 10, ..Default::default() };
    let b3 = occupancy::offline::max_potential_block_size("sm_90", &r, None, 0, 0, Some(&opts)).unwrap();
    assert_eq!(b3.block_size, b.block_size);
    let cfg = LaunchConfig::new(8, 128).cluster([2, 1, 1]);
    assert!(occupancy::offline::max_potential_cluster_size("sm_90", &r, &cfg, None).unwrap() >= 2);
    assert!(occupancy::offline::max_active_clusters("sm_90", &r, &cfg, None).unwrap() >= 1);
}

#[test]
fn smem_closure_panic_is_resumed_not_unwound_into_c() {
    let (_p, code) = segred();
    let r = code.kernel("segred<float, 256>").unwrap().resources().unwrap();
    let res = std::panic::catch_unwind(|| {
        let mut f = |_bs: i32| -> usize { panic!("boom in smem") };
        let _ = occupancy::offline::max_potential_block_size("sm_90", &r, Some(&mut f), 0, 0, None);
    });
    let msg = res.unwrap_err();
    assert_eq!(msg.downcast_ref::<&str>().copied(), Some("boom in smem"));
}

/// Issue 17: a kernel's parameter types come from its mangled name (C++)
/// or its PTX (extern "C"); a pack made for the kernel refuses a float for an
/// int parameter instead of reinterpreting the bits.
#[test]
fn kernel_param_types_and_typed_packs() {
    let (_p, code) = segred();
    let k = code.kernel("segred<float,256>").expect("spacing does not matter");
    assert_eq!(k.signature().unwrap(), "float const*, int const*, float*, int");
    let t = k.param_types().unwrap();
    assert_eq!(t.len(), 4);
    assert_eq!(t[0].kind, sys::CUABI_ARG_PTR);
    assert_eq!(t[3].kind, sys::CUABI_ARG_I32);
    assert_eq!(t[3].source, sys::CUABI_PARAM_FROM_NAME);
    assert_eq!(t[3].type_name, "int");
    let mut pack = cuabi::ArgPack::for_kernel(&k).unwrap();
    pack.set(3, &7i32).unwrap();
    let e = pack.set(3, &3.7f32).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_ARGUMENT_MISMATCH, "{e}");
    assert!(e.message.contains("slot 3 is i32"), "{e}");

    let mut p = Program::new(r#"extern "C" __global__ void k(float *p, int n, double a) {}"#, None).unwrap();
    let code = p.compile(&ProgramOptions::new().arch("sm_90")).unwrap();
    let k = code.kernel("k").unwrap();
    assert_eq!(k.signature().unwrap(), ".u64, .u32, .f64");
    assert_eq!(k.param_type(1).unwrap().source, sys::CUABI_PARAM_FROM_PTX);
    let mut pack = cuabi::ArgPack::for_kernel(&k).unwrap();
    pack.set(2, &2.0f64).unwrap();
    assert!(pack.set(2, &2i64).is_err(), "an integer is not a double's bits");
    assert!(k.param_type(3).is_err());
}

/// NVVM IR through libNVVM: text and bitcode to PTX (libdevice linked on
/// request) and LTO-IR, kernels by their IR names; malformed IR fails cleanly.
#[test]
fn nvvm_ir_programs() {
    // Built into the test binary: it runs wherever it is copied to (the GPU
    // host runs binaries built elsewhere; a path of the build machine's
    // source tree is not there).
    let text: &[u8] = include_bytes!("../../../../tests/fixtures/data/nvvm_kernels.ll");
    let bitcode: &[u8] = include_bytes!("../../../../tests/fixtures/data/nvvm_kernels.bc");
    for ir in [text, bitcode] {
        let mut p = Program::nvvm(ir, None).unwrap();
        let o = ProgramOptions::new().arch("sm_90").output(sys::CUABI_CODE_PTX).libdevice(true)
            .name_expression("expk");
        let code = match p.compile(&o) {
            Ok(c) => c,
            Err(e) if e.status == sys::CUABI_ERROR_NOT_SUPPORTED => return, // no libNVVM here
            Err(e) => panic!("{e:?}"),
        };
        assert_eq!(code.code_type(), sys::CUABI_CODE_PTX);
        assert_eq!(p.lowered_name("expk").unwrap(), "expk");
        let ptx = code.bytes();
        assert!(!String::from_utf8_lossy(ptx).contains("__nv_expf"));
        let mut names = code.kernel_names();
        names.sort();
        assert_eq!(names, vec!["expk".to_string(), "scale".to_string()]);
        let lto = p.compile(&o.clone().output(sys::CUABI_CODE_LTOIR)).unwrap();
        assert_eq!(lto.code_type(), sys::CUABI_CODE_LTOIR);
        let e = p.compile(&ProgramOptions::new().arch("sm_90")).unwrap_err();
        assert_eq!(e.status, sys::CUABI_ERROR_NOT_SUPPORTED); // no CUBIN from libNVVM
    }
    let mut bad = Program::nvvm(b"define void @k() {\n bogus\n}\n", None).unwrap();
    let e = bad.compile(&ProgramOptions::new().arch("sm_90").output(sys::CUABI_CODE_PTX)).unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_COMPILE);
    assert!(bad.log().contains("parse"));
}
