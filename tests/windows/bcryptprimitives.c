/* A stand-in for Windows' bcryptprimitives.dll, for running the any-OS
 * tools under Debian 12's Wine 8.0 only. Rust's standard library (1.78
 * and later) seeds its hash maps with ProcessPrng from
 * bcryptprimitives.dll, which every Windows 10 and 11 has but Wine 8.0
 * does not; without it the .exe does not start under Wine
 * ("Library bcryptprimitives.dll ... not found", c0000135). This exports
 * ProcessPrng on top of RtlGenRandom (advapi32's SystemFunction036), which
 * Wine has. scripts/test-windows builds it with mingw-w64 and puts it
 * beside the .exe in the test directory only; it is never shipped.
 */
#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buf, ULONG len);
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!SystemFunction036(data, n)) return FALSE;
        data += n; len -= n;
    }
    return TRUE;
}
