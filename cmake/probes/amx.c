/* Configure-time probe: can this compiler build AMX-BF16 code (TDPBF16PS, tile intrinsics)? */
#include <immintrin.h>
#include <stdint.h>
int main(int argc, char** argv) {
    _Alignas(64) uint8_t cfg[64] = {1};
    _Alignas(64) float c[16 * 16];
    (void)argv;
    if (argc > 1) { /* never run: compiled only */
        _tile_loadconfig(cfg);
        _tile_zero(0);
        _tile_dpbf16ps(0, 1, 2);
        _tile_stored(0, c, 64);
    }
    return 0;
}
