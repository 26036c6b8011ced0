/* residue: attacks the reset of a reused memory slot. Input "dirty" writes one byte in every
 * other 4 KiB page of a 1 MiB initialised array (pages of the memory image) and of a 4 MiB
 * zeroed one (pages beyond it): hundreds of separate runs of written pages, far more than one
 * batch of the kernel's page scan reports. Input "check" counts the bytes of both arrays that
 * differ from how the module starts ({"residue": 0} when nothing of an earlier call is left).
 * The arrays are volatile so that -O2 keeps every access. */
#include "glovebox.h"

#define PAGE 4096
static volatile unsigned char seeded[1 << 20] = {7};
static volatile unsigned char blank[4 << 20];

int gb_tool(const char *input, size_t len, gb_buf *out) {
    if (len >= 2 && input[1] == 'd') {
        unsigned long wrote = 0, seen = 0;
        for (unsigned long i = PAGE / 2; i < sizeof seeded; i += 2 * PAGE, wrote++) seeded[i] = 0xAB;
        for (unsigned long i = PAGE / 2; i < sizeof blank; i += 2 * PAGE, wrote++) blank[i] = 0xAB;
        for (unsigned long i = PAGE / 2; i < sizeof seeded; i += 2 * PAGE) seen += seeded[i] == 0xAB;
        for (unsigned long i = PAGE / 2; i < sizeof blank; i += 2 * PAGE) seen += blank[i] == 0xAB;
        gb_buf_printf(out, "{\"wrote\": %lu, \"seen\": %lu}", wrote, seen);
        return GB_OK;
    }
    unsigned long residue = seeded[0] != 7;
    for (unsigned long i = 1; i < sizeof seeded; i++) residue += seeded[i] != 0;
    for (unsigned long i = 0; i < sizeof blank; i++) residue += blank[i] != 0;
    gb_buf_printf(out, "{\"residue\": %lu}", residue);
    return GB_OK;
}
