// NEON for 32-bit ARM. Go's arm assembler has no NEON mnemonics, so the few
// instructions used here are encoded by hand (A32 encodings, ARM ARM DDI
// 0406). Arguments are register numbers: q for Q registers, d for D
// registers, r for core registers.

// Register fields of a D register number: Vd/D, Vn/N, Vm/M.
#define FD(d) ((((d)>>4)&1)<<22 | ((d)&15)<<12)
#define FN(d) ((((d)>>4)&1)<<7 | ((d)&15)<<16)
#define FM(d) ((((d)>>4)&1)<<5 | ((d)&15))

// VADD.I32 Qd, Qn, Qm
#define VADDQ(qd, qn, qm) WORD $(0xf2200840 | FD(2*(qd)) | FN(2*(qn)) | FM(2*(qm)))
// VEOR Qd, Qn, Qm
#define VEORQ(qd, qn, qm) WORD $(0xf3000150 | FD(2*(qd)) | FN(2*(qn)) | FM(2*(qm)))
// VMOV Qd, Qm (VORR Qd, Qm, Qm)
#define VMOVQ(qd, qm) WORD $(0xf2200150 | FD(2*(qd)) | FN(2*(qm)) | FM(2*(qm)))
// VSHL.I32 Qd, Qm, #n
#define VSHLQ(qd, qm, n) WORD $(0xf2800550 | (32+(n))<<16 | FD(2*(qd)) | FM(2*(qm)))
// VSRI.32 Qd, Qm, #n
#define VSRIQ(qd, qm, n) WORD $(0xf3800450 | (64-(n))<<16 | FD(2*(qd)) | FM(2*(qm)))
// VREV32.16 Qd, Qm: rotates each 32-bit lane by 16.
#define VREV32Q(qd, qm) WORD $(0xf3b400c0 | FD(2*(qd)) | FM(2*(qm)))
// VEXT.8 Qd, Qn, Qm, #n
#define VEXTQ(qd, qn, qm, n) WORD $(0xf2b00040 | (n)<<8 | FD(2*(qd)) | FN(2*(qn)) | FM(2*(qm)))
// VTRN.32 Dd, Dm
#define VTRND(dd, dm) WORD $(0xf3ba0080 | FD(dd) | FM(dm))
// VMLAL.U32 Qd, Dn, Dm
#define VMLALQ(qd, dn, dm) WORD $(0xf3a00800 | FD(2*(qd)) | FN(dn) | FM(dm))
// VLD1.8 {Dd-Dd+3}, [Rn]! and VST1.8 {Dd-Dd+3}, [Rn]!: 32 bytes, post-increment.
#define VLD1X4P(dd, rn) WORD $(0xf420020d | FD(dd) | (rn)<<16)
#define VST1X4P(dd, rn) WORD $(0xf400020d | FD(dd) | (rn)<<16)
// VLD1.8 {Dd-Dd+3}, [Rn]: 32 bytes.
#define VLD1X4(dd, rn) WORD $(0xf420020f | FD(dd) | (rn)<<16)
// VLD1.8 {Dd-Dd+1}, [Rn]! and [Rn]: 16 bytes.
#define VLD1X2P(dd, rn) WORD $(0xf4200a0d | FD(dd) | (rn)<<16)
#define VLD1X2(dd, rn) WORD $(0xf4200a0f | FD(dd) | (rn)<<16)
