/* Test-only stand-in for Windows' bcryptprimitives.dll under Wine 8, which lacks ProcessPrng
 * (Rust's std imports it since 1.78). Never shipped: `cargo xtask windows` builds it with MinGW
 * into the Wine test folder only. ProcessPrng fills the buffer from RtlGenRandom
 * (SystemFunction036 in advapi32), whose length is a ULONG, so it goes in chunks. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
