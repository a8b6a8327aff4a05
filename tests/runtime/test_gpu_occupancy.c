/* Offline occupancy against the driver on the local GPU: kernels with
 * different register counts (-maxrregcount) and static shared memory, random
 * block sizes and dynamic shared memory; at least 1,000 cases, all must
 * agree. Also the best block size and the available dynamic shared memory.
 * Exits 77 without a GPU. */
#include "testutil.h"

#include <cuda.h>

/* A kernel whose register use follows R (live values kept in registers)
 * and whose static shared memory is S bytes. */
static const char source[] =
    "template <int R, int S>\n"
    "__global__ void work(float *o, const float *in, int n) {\n"
    "  __shared__ float sh[S / 4 > 0 ? S / 4 : 1];\n"
    "  float acc[R];\n"
    "#pragma unroll\n"
    "  for (int r = 0; r < R; r++) acc[r] = in[(threadIdx.x * R + r) % n];\n"
    "  sh[threadIdx.x % (S / 4 > 0 ? S / 4 : 1)] = acc[0];\n"
    "  __syncthreads();\n"
    "  float t = sh[(threadIdx.x + 1) % (S / 4 > 0 ? S / 4 : 1)];\n"
    "#pragma unroll\n"
    "  for (int k = 0; k < 4; k++)\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < R; r++) acc[r] = acc[r] * acc[(r + k + 1) % R] + t;\n"
    "  float s = 0;\n"
    "#pragma unroll\n"
    "  for (int r = 0; r < R; r++) s += acc[r];\n"
    "  o[blockIdx.x * blockDim.x + threadIdx.x] = s;\n"
    "}\n";

static unsigned seed = 2024;
static unsigned rnd(unsigned n)
{
    seed = seed * 1103515245u + 12345u;
    return (seed >> 8) % n;
}

START_TEST(offline_agrees_with_driver)
{
    cuabi_device *dev;
    ck_assert_ok(cuabi_device_get(&dev, 0));
    int major, minor, optin;
    ck_assert_ok(cuabi_device_attribute(&major, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR));
    ck_assert_ok(cuabi_device_attribute(&minor, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
    ck_assert_ok(cuabi_device_attribute(&optin, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
    char arch[16];
    snprintf(arch, sizeof arch, "sm_%d%d", major, minor);
    cuabi_arch_limits lim = CUABI_ARCH_LIMITS_INIT;
    ck_assert_msg(cuabi_arch_limits_get(&lim, arch) == CUABI_SUCCESS,
                  "no offline limits for %s: %s", arch, cuabi_last_error()->message);
    printf("comparing offline %s against the driver\n", arch);

    static const char *exprs[] = { "work<2, 0>", "work<8, 1024>", "work<24, 8192>",
                                   "work<48, 20000>", "work<96, 40000>", "work<16, 30000>" };
    static const char *maxreg[] = { "-maxrregcount=32", "-maxrregcount=64", "-maxrregcount=128",
                                    "-maxrregcount=255", "-maxrregcount=40", "-maxrregcount=72" };
    int cases = 0, mismatches = 0, blocksize_cases = 0, smem_cases = 0;
    for (size_t v = 0; v < sizeof maxreg / sizeof maxreg[0]; v++) {
        cuabi_program *p;
        cuabi_objcode *code;
        cuabi_program_options o = CUABI_PROGRAM_OPTIONS_INIT;
        o.name_expressions = exprs;
        o.num_name_expressions = sizeof exprs / sizeof exprs[0];
        o.extra_options = &maxreg[v];
        o.num_extra_options = 1;
        ck_assert_ok(cuabi_program_create(&p, CUABI_CODE_CUDA_CXX, source, sizeof source - 1, "occ.cu"));
        ck_assert_ok(cuabi_program_compile(&code, p, &o));
        cuabi_program_release(p);
        for (size_t e = 0; e < sizeof exprs / sizeof exprs[0]; e++) {
            cuabi_kernel *k;
            ck_assert_ok(cuabi_objcode_get_kernel(&k, code, exprs[e]));
            cuabi_kernel_resources res = CUABI_KERNEL_RESOURCES_INIT;
            ck_assert_ok(cuabi_kernel_get_resources(&res, k));
            int regs;
            ck_assert_ok(cuabi_kernel_attribute(&regs, k, dev, CU_FUNC_ATTRIBUTE_NUM_REGS));
            ck_assert_int_eq(regs, res.registers);
            /* Half the kernels may use all opt-in shared memory, as the
             * offline options say. */
            cuabi_occupancy_options opt = CUABI_OCCUPANCY_OPTIONS_INIT;
            if (e % 2) {
                int maxdyn = optin - (int)res.shared_static_bytes;
                ck_assert_ok(cuabi_kernel_set_attribute(k, dev,
                             CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, maxdyn));
                opt.max_dynamic_shared_bytes = maxdyn;
            }
            int maxdyn_now;
            ck_assert_ok(cuabi_kernel_attribute(&maxdyn_now, k, dev,
                         CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES));
            for (int c = 0; c < 40; c++) {
                int block = rnd(3) ? (int)(rnd(32) + 1) * 32 : (int)rnd(1024) + 1;
                size_t dyn = rnd(4) == 0 ? 0 : rnd((unsigned)maxdyn_now + 2048);
                cuabi_occupancy_result live = CUABI_OCCUPANCY_RESULT_INIT;
                cuabi_occupancy_result off = CUABI_OCCUPANCY_RESULT_INIT;
                ck_assert_ok(cuabi_occupancy_max_active_blocks(&live, k, dev, block, dyn));
                ck_assert_ok(cuabi_occupancy_offline_max_active_blocks(&off, arch, &res, block, dyn, &opt));
                cases++;
                if (live.active_blocks_per_sm != off.active_blocks_per_sm) {
                    if (mismatches++ < 20)
                        printf("MISMATCH %s %s regs=%d static=%zu block=%d dyn=%zu: driver %d, "
                               "offline %d (%s)\n", exprs[e], maxreg[v], res.registers,
                               res.shared_static_bytes, block, dyn, live.active_blocks_per_sm,
                               off.active_blocks_per_sm, cuabi_occupancy_limiter_name(off.limiter));
                }
            }
            /* best block size, fixed dynamic shared memory */
            size_t dyn = rnd(2) ? 0 : rnd(8192);
            int lb, lg, ob, og;
            ck_assert_ok(cuabi_occupancy_max_potential_block_size(&lb, &lg, k, dev, NULL, NULL, dyn, 0));
            cuabi_occupancy_options o2 = opt;
            o2.sm_count = lim.sm_count;
            int sms;
            ck_assert_ok(cuabi_device_attribute(&sms, dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
            o2.sm_count = sms;
            ck_assert_ok(cuabi_occupancy_offline_max_potential_block_size(&ob, &og, arch, &res, NULL,
                                                                          NULL, dyn, 0, &o2));
            blocksize_cases++;
            if (lb != ob || lg != og) {
                mismatches++;
                printf("MISMATCH best block %s %s dyn=%zu: driver %d/%d, offline %d/%d\n",
                       exprs[e], maxreg[v], dyn, lb, lg, ob, og);
            }
            /* available dynamic shared memory */
            for (int nb = 1; nb <= 4; nb++) {
                size_t la = 0, oa = 0;
                cuabi_status ls = cuabi_occupancy_available_dynamic_smem(&la, k, dev, nb, 128);
                cuabi_status os = cuabi_occupancy_offline_available_dynamic_smem(&oa, arch, &res, nb,
                                                                                 128, &opt);
                cuabi_error_clear();
                if (ls != CUABI_SUCCESS || os != CUABI_SUCCESS)
                    continue;
                smem_cases++;
                if (la != oa) {
                    mismatches++;
                    printf("MISMATCH available smem %s %s blocks=%d: driver %zu, offline %zu\n",
                           exprs[e], maxreg[v], nb, la, oa);
                }
            }
            cuabi_kernel_release(k);
        }
        cuabi_objcode_release(code);
    }
    printf("%d block-count cases, %d best-block-size cases, %d available-smem cases: "
           "%d mismatches\n", cases, blocksize_cases, smem_cases, mismatches);
    ck_assert_int_ge(cases, 1000);
    ck_assert_int_eq(mismatches, 0);
    cuabi_device_release(dev);
}
END_TEST

int main(void)
{
    cuabi_test_require_gpu();
    Suite *s = suite_create("gpu_occupancy");
    TCase *tc = tcase_create("agreement");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, offline_agrees_with_driver);
    suite_add_tcase(s, tc);
    return cuabi_test_run(s);
}
