//! Launch attributes and tensor maps on a GPU (compute capability 9.0):
//! programmatic dependent launch overlaps and stays correct; a Hopper kernel
//! loads tiles of a strided view through a TensorMap argument. Each test
//! prints SKIP and returns without a driver, a GPU or sm_90.
mod common;
use cuabi::{launch, ArgPack, DType, LaunchAttributes, LaunchConfig, MemoryResource, Program,
            ProgramOptions, Stream, TensorMap, TensorMapOptions, View, sys};

const PDL: &str = r#"
__device__ unsigned long long now_ns() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
extern "C" __global__ void primary(unsigned long long *t, int *x, int n, unsigned long long ns) {
  asm volatile("griddepcontrol.launch_dependents;");
  unsigned long long t0 = now_ns(); while (now_ns() - t0 < ns) { }
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = i;
  __syncthreads();
  if (threadIdx.x == 0) { __threadfence(); atomicMax(&t[0], now_ns()); }
}
extern "C" __global__ void secondary(unsigned long long *t, const int *x, int *y, int n) {
  if (threadIdx.x == 0 && blockIdx.x == 0) t[1] = now_ns();
  asm volatile("griddepcontrol.wait;" ::: "memory");
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = 2 * x[i];
}
"#;

const TMA: &str = r#"
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
"#;

fn hopper() -> Option<cuabi::Device> {
    let dev = common::gpu()?;
    let major = dev.attribute(sys_attr::CC_MAJOR).unwrap();
    if major < 9 {
        eprintln!("SKIP: compute capability {major}.x (PDL overlap and TMA need 9.0)");
        return None;
    }
    Some(dev)
}

mod sys_attr {
    pub const CC_MAJOR: i32 = 75; // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
}

#[test]
fn programmatic_dependent_launch() {
    let Some(dev) = hopper() else { return };
    const N: usize = 1 << 20;
    let code = Program::new(PDL, Some("pdl.cu")).unwrap().compile(&ProgramOptions::new()).unwrap();
    let (kp, ks) = (code.kernel("primary").unwrap(), code.kernel("secondary").unwrap());
    let res = MemoryResource::device_default(&dev).unwrap();
    let stream = Stream::new(&dev).unwrap();
    let mut t = res.allocate(16, 0, Some(&stream)).unwrap();
    let x = res.allocate(4 * N, 0, Some(&stream)).unwrap();
    let y = res.allocate(4 * N, 0, Some(&stream)).unwrap();
    stream.synchronize().unwrap();
    t.copy_from_host(0, &[0u64, 0]).unwrap();
    let mut pp = ArgPack::new("buffer, buffer, i32, u64").unwrap();
    pp.set(0, &t.arg()).unwrap();
    pp.set(1, &x.arg()).unwrap();
    pp.set(2, &(N as i32)).unwrap();
    pp.set(3, &2_000_000u64).unwrap();
    let mut ps = ArgPack::new("buffer, buffer, buffer, i32").unwrap();
    ps.set(0, &t.arg()).unwrap();
    ps.set(1, &x.arg()).unwrap();
    ps.set(2, &y.arg()).unwrap();
    ps.set(3, &(N as i32)).unwrap();
    // GPU run A: without this warm-up the first pair did not overlap. Lazy
    // module loading loads each kernel at its first launch, which waits for
    // the work before it; the C suite warms up with its PDL-off run.
    // SAFETY: the test's kernels touch only the memory their packs name, which stays alive and unused by the host until the stream or device is synchronized below.
    unsafe { launch(&kp, &pp, &LaunchConfig::new(4, 128).on_stream(&stream)) }.unwrap();
    // SAFETY: the test's kernels touch only the memory their packs name, which stays alive and unused by the host until the stream or device is synchronized below.
    unsafe { launch(&ks, &ps, &LaunchConfig::new(8, 256).on_stream(&stream)) }.unwrap();
    stream.synchronize().unwrap();
    t.copy_from_host(0, &[0u64, 0]).unwrap();
    let attrs = LaunchAttributes { programmatic_stream_serialization: true, ..Default::default() };
    // SAFETY: the test's kernels touch only the memory their packs name, which stays alive and unused by the host until the stream or device is synchronized below.
    unsafe { launch(&kp, &pp, &LaunchConfig::new(4, 128).on_stream(&stream)) }.unwrap();
    // SAFETY: the test's kernels touch only the memory their packs name, which stays alive and unused by the host until the stream or device is synchronized below.
    unsafe { launch(&ks, &ps, &LaunchConfig::new(8, 256).on_stream(&stream).attributes(&attrs)) }.unwrap();
    stream.synchronize().unwrap();
    let mut stamps = [0u64; 2];
    t.copy_to_host(&mut stamps, 0).unwrap();
    let mut out = vec![0i32; N];
    y.copy_to_host(&mut out, 0).unwrap();
    assert!(out.iter().enumerate().all(|(i, &v)| v == 2 * i as i32));
    assert!(stamps[1] < stamps[0], "the dependent kernel did not start before the primary ended");
}

#[test]
fn tma_tile_of_a_strided_view() {
    let Some(dev) = hopper() else { return };
    let code = Program::new(TMA, Some("tma.cu")).unwrap().compile(&ProgramOptions::new()).unwrap();
    let k = code.kernel("tile").unwrap();
    let res = MemoryResource::device_default(&dev).unwrap();
    let host: Vec<f32> = (0..64 * 96).map(|i| i as f32).collect();
    let mut buf = res.allocate(host.len() * 4, 0, None).unwrap();
    buf.copy_from_host(0, &host).unwrap();
    // rows 2.., columns 8.. of the 64 x 96 matrix: 62 x 88 at a row stride of 96
    let view = View::new(&buf, (2 * 96 + 8) * 4, DType::F32, &[62, 88], Some(&[96, 1]), 0).unwrap();
    let tm = TensorMap::tiled(&view, &[16, 32], &TensorMapOptions::default()).unwrap();
    assert_eq!(tm.info().unwrap().rank, 2);
    let out = res.allocate(16 * 32 * 4, 0, None).unwrap();
    let mut p = ArgPack::new("tensormap, buffer").unwrap();
    p.set(0, &tm).unwrap();
    p.set(1, &out.arg()).unwrap();
    let stream = Stream::new(&dev).unwrap();
    // SAFETY: the test's kernels touch only the memory their packs name, which stays alive and unused by the host until the stream or device is synchronized below.
    unsafe { launch(&k, &p, &LaunchConfig::new(1, 128).on_stream(&stream)) }.unwrap();
    stream.synchronize().unwrap();
    let mut got = vec![0f32; 16 * 32];
    out.copy_to_host(&mut got, 0).unwrap();
    for r in 0..16 {
        for c in 0..32 {
            assert_eq!(got[r * 32 + c], host[(r + 2) * 96 + c + 8]);
        }
    }
    assert_eq!(tm.bytes().unwrap().len(), sys::CUABI_TENSORMAP_BYTES as usize);
}
