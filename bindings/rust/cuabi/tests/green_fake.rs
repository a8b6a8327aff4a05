//! Green contexts, waves and checkpoints against the C tests' fake driver
//! (tests/fixtures/fake_cuda_graph.c, CUABI_TEST_FAKE_CUDA, set by
//! tests/bindings/check_rust.sh): 132 SMs, groups rounded up to multiples
//! of 8, the min grid size scaled to the partition, a checkpoint fake that
//! knows pid 4242. Each test prints SKIP and returns without the fake.
use std::sync::Once;

use cuabi::checkpoint::Process;
use cuabi::green::{self, GreenContext, SmResource};
use cuabi::{sys, Device, Program, ProgramOptions};

static INIT: Once = Once::new();

fn fake() -> Option<Device> {
    let Ok(path) = std::env::var("CUABI_TEST_FAKE_CUDA") else {
        eprintln!("SKIP: CUABI_TEST_FAKE_CUDA not set (tests/bindings/check_rust.sh sets it)");
        return None;
    };
    // SAFETY: set once, before the library first loads the driver.
    INIT.call_once(|| unsafe { std::env::set_var("CUABI_DRIVER_PATH", path) });
    Some(Device::get(0).expect("fake device 0"))
}

#[test]
fn split_create_stream_occupancy() {
    let Some(dev) = fake() else { return };
    let all = SmResource::of_device(&dev).unwrap();
    let i = all.info().unwrap();
    assert_eq!((i.sm_count, i.min_partition_size, i.coscheduled_alignment), (132, 8, 8));
    assert_eq!(all.group_count(10, sys::CUABI_SM_SPLIT_DEFAULT).unwrap(), 8);
    let (groups, rem) = all.split(2, 10, sys::CUABI_SM_SPLIT_DEFAULT).unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0].info().unwrap().sm_count, 16);
    assert_eq!(rem.as_ref().unwrap().info().unwrap().sm_count, 100);
    let (fine, _) = all.split(1, 9, sys::CUABI_SM_SPLIT_IGNORE_SM_COSCHEDULING).unwrap();
    assert_eq!(fine[0].info().unwrap().sm_count, 10);
    assert!(all.split(1, 133, sys::CUABI_SM_SPLIT_DEFAULT).is_err());

    let g = GreenContext::new(&dev, &[&groups[0]]).unwrap();
    assert_eq!(g.sm_count().unwrap(), 16);
    assert_eq!(g.raw().unwrap(), g.context().unwrap());
    assert_eq!(g.sm_resource().unwrap().info().unwrap().sm_count, 16);
    assert!(GreenContext::new(&dev, &[&groups[0], &fine[0]]).is_err()); // two splits
    let s = g.create_stream(-1).unwrap();
    assert_eq!(green::stream_green_context(&s).unwrap().unwrap().sm_count().unwrap(), 16);
    drop(g); // the stream keeps it
    let g2 = green::stream_green_context(&s).unwrap().unwrap();
    g2.synchronize().unwrap();

    let mut p = Program::new("extern \"C\" __global__ void k(float *x) {}\n", Some("k.cu")).unwrap();
    let k = p.compile(&ProgramOptions::new().arch("sm_90")).unwrap().kernel("k").unwrap();
    let (block, grid) = g2.max_potential_block_size(&k, 0).unwrap();
    assert!(block > 0 && grid > 0 && grid % 16 == 0);
    let w = g2.waves(&k, 128, 0, 1000).unwrap();
    assert_eq!((w.sm_count, w.blocks_per_sm, w.waves), (16, 4, 16));
    assert_eq!(green::waves(&k, &dev, 128, 0, 1000).unwrap().waves, 2);
    let res = k.resources().unwrap();
    let off = green::offline_waves("sm_90", &res, 16, 256, 0, 1000, None).unwrap();
    assert_eq!(off.sm_count, 16);
    assert!(green::offline_waves("sm_90", &res, 16, 256, 0, 0, None).is_err());
}

#[test]
fn checkpoint_cycle() {
    let Some(_dev) = fake() else { return };
    let p = Process::new(4242);
    assert_eq!(p.state().unwrap(), sys::CUABI_PROCESS_STATE_RUNNING);
    assert_eq!(p.restore_thread_id().unwrap(), 5242);
    p.lock(1000).unwrap();
    assert!(p.lock(1000).is_err());
    p.checkpoint().unwrap();
    assert_eq!(Process::state_name(p.state().unwrap()), "checkpointed");
    let uuid: [u8; 16] = core::array::from_fn(|b| b as u8); // the fake's device 0
    p.restore(&[(uuid, uuid)]).unwrap();
    p.unlock().unwrap();
    assert_eq!(p.state().unwrap(), sys::CUABI_PROCESS_STATE_RUNNING);
    assert!(Process::new(999_999).state().is_err());
}


#[test]
fn workqueue_configurations() {
    let Some(dev) = fake() else { return };
    let d = green::device_workqueue_config(&dev).unwrap();
    assert_eq!((d.concurrency_limit, d.sharing_scope, d.ordinal), (8, sys::CUABI_WORKQUEUE_SCOPE_DEVICE_CTX, 0));
    let all = SmResource::of_device(&dev).unwrap();
    let (groups, _rem) = all.split(1, 16, sys::CUABI_SM_SPLIT_DEFAULT).unwrap();
    let want = green::workqueue_config(3, true).unwrap();
    let g = GreenContext::with_workqueue(&dev, &[&groups[0]], &want).unwrap();
    let got = g.workqueue_config().unwrap();
    assert_eq!((got.concurrency_limit, got.sharing_scope), (3, sys::CUABI_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED));
    assert_eq!(g.sm_count().unwrap(), 16);
    let zero = green::workqueue_config(0, false).unwrap();
    assert!(GreenContext::with_workqueue(&dev, &[&groups[0]], &zero).is_err());
}

#[test]
fn push_current_guards_pop_in_reverse_order() {
    let Some(d0) = fake() else { return };
    let d1 = Device::get(1).unwrap();
    // SAFETY: the devices are live; a pop that does not match is refused.
    let pop = |d: &Device| unsafe { sys::cuabi_device_pop_current(d.as_raw()) };
    assert_eq!(pop(&d0), sys::CUABI_ERROR_INVALID_ARGUMENT); // nothing pushed
    {
        let _g0 = d0.push_current().unwrap();
        {
            let _g1 = d1.push_current().unwrap();
            assert_eq!(pop(&d0), sys::CUABI_ERROR_INVALID_ARGUMENT); // not the last push
        }
        // _g1 popped d1: d0's is the last push again, and _g0 pops it.
    }
    assert_eq!(pop(&d0), sys::CUABI_ERROR_INVALID_ARGUMENT);
    assert_eq!(pop(&d1), sys::CUABI_ERROR_INVALID_ARGUMENT);
}
