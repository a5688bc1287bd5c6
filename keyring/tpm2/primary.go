package tpm2

import (
	"fmt"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// createPrimary recreates the primary key systemd 252 seals under: in
// the owner hierarchy, from its fixed template (a storage key, ECC P-256
// or RSA-2048, AES-128-CFB, an empty unique field, no noDA), so the same
// TPM derives the same key every time.
func createPrimary(tpm transport.TPM, alg string) (*tpm2.CreatePrimaryResponse, error) {
	attrs := tpm2.TPMAObject{
		FixedTPM:            true,
		FixedParent:         true,
		SensitiveDataOrigin: true,
		UserWithAuth:        true,
		Restricted:          true,
		Decrypt:             true,
	}
	aes128CFB := tpm2.TPMTSymDefObject{
		Algorithm: tpm2.TPMAlgAES,
		KeyBits:   tpm2.NewTPMUSymKeyBits(tpm2.TPMAlgAES, tpm2.TPMKeyBits(128)),
		Mode:      tpm2.NewTPMUSymMode(tpm2.TPMAlgAES, tpm2.TPMAlgCFB),
	}
	var tmpl tpm2.TPMTPublic
	switch alg {
	case "ecc":
		tmpl = tpm2.TPMTPublic{
			Type: tpm2.TPMAlgECC, NameAlg: tpm2.TPMAlgSHA256, ObjectAttributes: attrs,
			Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgECC, &tpm2.TPMSECCParms{
				Symmetric: aes128CFB,
				Scheme:    tpm2.TPMTECCScheme{Scheme: tpm2.TPMAlgNull},
				CurveID:   tpm2.TPMECCNistP256,
				KDF:       tpm2.TPMTKDFScheme{Scheme: tpm2.TPMAlgNull},
			}),
			Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{}),
		}
	case "rsa":
		tmpl = tpm2.TPMTPublic{
			Type: tpm2.TPMAlgRSA, NameAlg: tpm2.TPMAlgSHA256, ObjectAttributes: attrs,
			Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgRSA, &tpm2.TPMSRSAParms{
				Symmetric: aes128CFB,
				Scheme:    tpm2.TPMTRSAScheme{Scheme: tpm2.TPMAlgNull},
				KeyBits:   2048,
			}),
			Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgRSA, &tpm2.TPM2BPublicKeyRSA{}),
		}
	default:
		return nil, fmt.Errorf("%w: primary key type %q", ErrBadToken, alg)
	}
	rsp, err := tpm2.CreatePrimary{
		PrimaryHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)},
		InPublic:      tpm2.New2B(tmpl),
	}.Execute(tpm)
	if err != nil {
		return nil, fmt.Errorf("systemd-tpm2: creating the primary key: %w", err)
	}
	return rsp, nil
}
