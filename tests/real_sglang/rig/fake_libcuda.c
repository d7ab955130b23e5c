/* Stand-in libcuda.so.1 for CPU-only test machines (test support, not product code).
 *
 * sgl-kernel's common_ops library links against libcuda.so.1 and will not load without it.
 * These six entry points are the ones it resolves; each reports CUDA_ERROR_NO_DEVICE (100),
 * so torch.cuda.is_available() stays False and nothing ever runs on a "GPU".
 * Built at test time by tests/real_sglang/rig/build.py with the system C compiler.
 */
#define CUDA_ERROR_NO_DEVICE 100

int cuInit(unsigned int flags) { (void)flags; return CUDA_ERROR_NO_DEVICE; }
int cuDriverGetVersion(int *version) { if (version) *version = 0; return CUDA_ERROR_NO_DEVICE; }
int cuDeviceGetCount(int *count) { if (count) *count = 0; return CUDA_ERROR_NO_DEVICE; }
int cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags) {
    (void)symbol; (void)version; (void)flags;
    if (pfn) *pfn = 0;
    return CUDA_ERROR_NO_DEVICE;
}
int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                        void *status) {
    (void)symbol; (void)version; (void)flags; (void)status;
    if (pfn) *pfn = 0;
    return CUDA_ERROR_NO_DEVICE;
}
int cuPointerGetAttribute(void *data, int attribute, unsigned long long ptr) {
    (void)data; (void)attribute; (void)ptr;
    return CUDA_ERROR_NO_DEVICE;
}
