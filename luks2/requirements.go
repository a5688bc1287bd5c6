package luks2

import "fmt"

// LUKS2 mandatory requirements, as cryptsetup 2.6.1 knows them: its
// reencryption flags, and anything else, which it calls unmet.

var (
	// ErrUnmetRequirements: the header names a mandatory requirement
	// cryptsetup does not know (its "Unmet LUKS2 requirements detected.").
	ErrUnmetRequirements = fmt.Errorf("%w: unmet LUKS2 requirements", ErrUnsupported)
	// ErrReencryption: the header is marked for LUKS2 reencryption (its
	// "Operation incompatible with device marked for LUKS2 reencryption.
	// Aborting.").
	ErrReencryption = fmt.Errorf("%w: operation incompatible with device marked for LUKS2 reencryption", ErrUnsupported)
	// ErrLegacyReencryption: marked for the old offline reencryption
	// ("Operation incompatible with device marked for legacy
	// reencryption. Aborting.").
	ErrLegacyReencryption = fmt.Errorf("%w: operation incompatible with device marked for legacy reencryption", ErrUnsupported)
)

// requirementsError is cryptsetup's LUKS2_unmet_requirements without a
// mask: an unknown requirement first, then reencryption.
func requirementsError(mandatory []string) error {
	var legacy, online bool
	for _, r := range mandatory {
		switch {
		case isOnlineReencrypt(r):
			online = true
		case r == "offline-reencrypt":
			legacy = true
		default:
			return ErrUnmetRequirements
		}
	}
	switch {
	case legacy:
		return ErrLegacyReencryption
	case online:
		return ErrReencryption
	}
	return nil
}

// requirementsMet is requirementsError for the header's requirements.
func (h *header) requirementsMet() error { return requirementsError(h.meta.mandatory) }

// requirementsMet: LUKS1 headers have no requirements.
func (h *luks1Header) requirementsMet() error { return nil }
