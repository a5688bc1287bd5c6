// NEON for 32-bit ARM. Go's arm assembler has no NEON mnemonics, so the
// instructions used here are encoded by hand (A32 encodings, ARM ARM DDI
// 0406), as in adiantum's neon_arm.h, whose encodings these extend with
// the 64-bit lane arithmetic Argon2 needs. Arguments are register numbers:
// q for Q registers, d for D registers, r for core registers.

// Register fields of a D register number: Vd/D, Vn/N, Vm/M.
#define FD(d) ((((d)>>4)&1)<<22 | ((d)&15)<<12)
#define FN(d) ((((d)>>4)&1)<<7 | ((d)&15)<<16)
#define FM(d) ((((d)>>4)&1)<<5 | ((d)&15))

// VEOR Qd, Qn, Qm
#define VEORQ(qd, qn, qm) WORD $(0xf3000150 | FD(2*(qd)) | FN(2*(qn)) | FM(2*(qm)))
// VADD.I64 Qd, Qn, Qm
#define VADD64Q(qd, qn, qm) WORD $(0xf2300840 | FD(2*(qd)) | FN(2*(qn)) | FM(2*(qm)))
// VMOVN.I64 Dd, Qm: the low 32 bits of each 64-bit lane.
#define VMOVN64(dd, qm) WORD $(0xf3ba0200 | FD(dd) | FM(2*(qm)))
// VMLAL.U32 Qd, Dn, Dm
#define VMLAL32(qd, dn, dm) WORD $(0xf3a00800 | FD(2*(qd)) | FN(dn) | FM(dm))
// VREV64.32 Qd, Qm: rotates each 64-bit lane by 32.
#define VREV64Q(qd, qm) WORD $(0xf3b80040 | FD(2*(qd)) | FM(2*(qm)))
// VEXT.8 Qd, Qn, Qm, #n
#define VEXTQ(qd, qn, qm, n) WORD $(0xf2b00040 | (n)<<8 | FD(2*(qd)) | FN(2*(qn)) | FM(2*(qm)))
// VEXT.8 Dd, Dm, Dm, #n: rotates the 64-bit Dm right by 8n bits.
#define VRORD(dd, dm, n) WORD $(0xf2b00000 | (n)<<8 | FD(dd) | FN(dm) | FM(dm))
// VSHL.I64 Qd, Qm, #n
#define VSHL64Q(qd, qm, n) WORD $(0xf28005d0 | (n)<<16 | FD(2*(qd)) | FM(2*(qm)))
// VSRI.64 Qd, Qm, #n
#define VSRI64Q(qd, qm, n) WORD $(0xf38004d0 | (64-(n))<<16 | FD(2*(qd)) | FM(2*(qm)))
// VLD1.8 {Dd-Dd+3}, [Rn]! and VST1.8 {Dd-Dd+3}, [Rn]!: 32 bytes, post-increment.
#define VLD1X4P(dd, rn) WORD $(0xf420020d | FD(dd) | (rn)<<16)
#define VST1X4P(dd, rn) WORD $(0xf400020d | FD(dd) | (rn)<<16)
// VLD1.8 {Dd-Dd+1}, [Rn], Rm and VST1.8 {Dd-Dd+1}, [Rn], Rm: 16 bytes, then
// Rn += Rm.
#define VLD1X2R(dd, rn, rm) WORD $(0xf4200a00 | FD(dd) | (rn)<<16 | (rm))
#define VST1X2R(dd, rn, rm) WORD $(0xf4000a00 | FD(dd) | (rn)<<16 | (rm))
// VLD1.8 {Dd-Dd+1}, [Rn]: 16 bytes.
#define VLD1X2(dd, rn) WORD $(0xf4200a0f | FD(dd) | (rn)<<16)
