//! Launches on a GPU: segmented reduction through buffers and views,
//! prepared launches, device memory resources, live occupancy. Each test
//! prints SKIP and returns without a driver or GPU.
mod common;
use cuabi::{launch, ArgPack, DType, LaunchConfig, MemoryResource, PreparedLaunch, Program, ProgramOptions, Stream, View, sys};

const SRC: &str = r#"
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
extern "C" __global__ void add_one(int *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1; }
"#;

fn kernels() -> (cuabi::Kernel, cuabi::Kernel) {
    let mut p = Program::new(SRC, Some("gpu.cu")).unwrap();
    let code = p.compile(&ProgramOptions::new().name_expression("segred<float, 256>")).unwrap();
    (code.kernel("segred<float, 256>").unwrap(), code.kernel("add_one").unwrap())
}

#[test]
fn segmented_reduction_buffers_and_views() {
    let Some(dev) = common::gpu() else { return };
    let (k, _) = kernels();
    let res = MemoryResource::device_default(&dev).unwrap();
    let stream = Stream::new(&dev).unwrap();
    let input: Vec<f32> = (1..=12).map(|i| i as f32).collect();
    let off = [0i32, 4, 8, 12];
    let mut bin = res.allocate(48, 0, Some(&stream)).unwrap();
    let mut boff = res.allocate(16, 0, Some(&stream)).unwrap();
    let mut bout = res.allocate(12, 0, Some(&stream)).unwrap();
    stream.synchronize().unwrap();
    bin.copy_from_host(0, &input).unwrap();
    boff.copy_from_host(0, &off).unwrap();
    let pack = ArgPack::builder().arg(bin.arg()).arg(boff.arg()).arg(bout.arg()).arg(3i32).build().unwrap();
    let cfg = LaunchConfig::new(3, 256).on_stream(&stream);
    cuabi::launch_check(&k, &pack, &cfg).unwrap();
    // SAFETY: the test's kernels touch only the memory their packs name, which stays alive and unused by the host until the stream or device is synchronized below.
    unsafe { launch(&k, &pack, &cfg) }.unwrap();
    stream.synchronize().unwrap();
    assert_eq!(bout.to_vec::<f32>().unwrap(), vec![10.0, 26.0, 42.0]);

    // The same through views (device DLPack type, ordinal as id).
    let vin = View::new(&bin, 0, DType::F32, &[12], None, 0).unwrap();
    let i = vin.info();
    assert_eq!((i.device_type, i.device_id), (sys::kDLCUDA, dev.ordinal() as i32));
    let vout = View::new(&bout, 0, DType::F32, &[3], None, 0).unwrap();
    bout.memset(0, 0, 4, 3, None).unwrap();
    let pack = ArgPack::builder().arg(vin.arg()).arg(boff.arg()).arg(vout.arg()).arg(3i32).build().unwrap();
    // SAFETY: the test's kernels touch only the memory their packs name, which stays alive and unused by the host until the stream or device is synchronized below.
    unsafe { k.launch(&pack, &LaunchConfig::new(3, 256).on_device(&dev)) }.unwrap();
    dev.synchronize().unwrap();
    assert_eq!(bout.to_vec::<f32>().unwrap(), vec![10.0, 26.0, 42.0]);

    // A block larger than allowed is refused before launching.
    // SAFETY: the test's kernels touch only the memory their packs name, which stays alive and unused by the host until the stream or device is synchronized below.
    let e = unsafe { launch(&k, &pack, &LaunchConfig::new(3, 2048).on_device(&dev)) }.unwrap_err();
    assert_eq!(e.status, sys::CUABI_ERROR_LAUNCH_CONFIG, "{e}");
    // A destroyed buffer fails the launch, naming the slot.
    let pack2 = ArgPack::builder().arg(bin.arg()).arg(boff.arg()).arg(bout.arg()).arg(3i32).build().unwrap();
    bout.free_async(&stream).unwrap();
    // SAFETY: the test's kernels touch only the memory their packs name, which stays alive and unused by the host until the stream or device is synchronized below.
    assert!(unsafe { launch(&k, &pack2, &cfg) }.is_err());
    bin.free_async(&stream).unwrap();
    stream.synchronize().unwrap();
}

#[test]
fn large_random_and_prepared() {
    let Some(dev) = common::gpu() else { return };
    let (k, add_one) = kernels();
    // xorshift: deterministic "random" segments and values.
    let mut x = 0x9E3779B97F4A7C15u64;
    let mut rnd = move || { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x };
    let mut off = vec![0i32];
    while *off.last().unwrap() < 1_000_000 {
        let len = (rnd() % 5000) as i32;
        off.push((*off.last().unwrap() + len).min(1_000_000));
    }
    let n = *off.last().unwrap() as usize;
    let input: Vec<f32> = (0..n).map(|_| (rnd() % 100) as f32 / 8.0).collect();
    let segs = off.len() - 1;
    let res = MemoryResource::pool(&dev, None).unwrap();
    let mut bin = res.allocate(n * 4, 0, None).unwrap();
    let mut boff = res.allocate(off.len() * 4, 0, None).unwrap();
    let mut bout = res.allocate(segs * 4, 0, None).unwrap();
    bin.copy_from_host(0, &input).unwrap();
    boff.copy_from_host(0, &off).unwrap();
    let pack = ArgPack::builder().arg(bin.arg()).arg(boff.arg()).arg(bout.arg()).arg(segs as i32).build().unwrap();
    let stream = Stream::new(&dev).unwrap();
    let mut prep = PreparedLaunch::new(&k, pack, &LaunchConfig::new(segs as u32, 256).on_stream(&stream)).unwrap();
    // SAFETY: the test's kernels touch only the memory their packs name, which stays alive and unused by the host until the stream or device is synchronized below.
    unsafe { prep.launch() }.unwrap();
    stream.synchronize().unwrap();
    let got = bout.to_vec::<f32>().unwrap();
    for s in 0..segs {
        let want: f64 = input[off[s] as usize..off[s + 1] as usize].iter().map(|&v| v as f64).sum();
        assert!((got[s] as f64 - want).abs() <= 1e-3 * want.abs().max(1.0), "segment {s}: {} vs {want}", got[s]);
    }
    // Only the first half of the segments after changing the count and grid.
    bout.memset(0, 0, 4, segs, None).unwrap();
    prep.set(3, &((segs / 2) as i32)).unwrap();
    prep.set_grid((segs / 2) as u32, 1, 1).unwrap();
    // SAFETY: the test's kernels touch only the memory their packs name, which stays alive and unused by the host until the stream or device is synchronized below.
    unsafe { prep.launch() }.unwrap();
    stream.synchronize().unwrap();
    let half = bout.to_vec::<f32>().unwrap();
    assert_eq!(half[..segs / 2], got[..segs / 2]);
    assert!(half[segs / 2..].iter().all(|&v| v == 0.0));

    // Pinned, managed and host-wrapped memory, live occupancy.
    let pinned = MemoryResource::pinned(&dev).unwrap().allocate(1024, 0, None).unwrap();
    assert_eq!(pinned.kind(), sys::CUABI_MEMORY_PINNED);
    let mut managed = MemoryResource::managed(&dev).unwrap().allocate(400, 0, None).unwrap();
    managed.copy_from_host(0, &(0..100).collect::<Vec<i32>>()).unwrap();
    // SAFETY: the test's kernels touch only the memory their packs name, which stays alive and unused by the host until the stream or device is synchronized below.
    unsafe { add_one.launch(&ArgPack::builder().arg(managed.arg()).arg(100i32).build().unwrap(), &LaunchConfig::new(1, 128).on_device(&dev)) }.unwrap();
    dev.synchronize().unwrap();
    assert_eq!(managed.to_vec::<i32>().unwrap(), (1..=100).collect::<Vec<i32>>());
    let occ = k.occupancy(&dev, 256, 0).unwrap();
    assert!(occ.active_blocks_per_sm >= 1);
    let mut calls = 0;
    let mut f = |_bs: i32| { calls += 1; 0usize };
    let b = k.max_potential_block_size(&dev, Some(&mut f), 0, 0).unwrap();
    assert!(b.block_size > 0 && calls > 0);
    assert!(k.available_dynamic_smem(&dev, 1, 256).unwrap() > 0);
    assert!(k.attribute(&dev, 4 /* CU_FUNC_ATTRIBUTE_NUM_REGS */).unwrap() > 0);
    assert!(k.function(&dev).unwrap() != 0 && k.raw().unwrap() != 0);
    res.trim(0).unwrap();
}
