package reward

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
)

// Calibrated is CalibrateReward's answer: calibration.json and
// certificate.json, ready to be written beside the contract.
type Calibrated struct {
	Calibration     *Calibration
	CalibrationJSON []byte
	CertificateJSON []byte
}

// Calibrate calibrates a registered contract and signs the certificate with
// the daemon key. trials, delta and seed default when zero (seed: nil).
func (s *Service) Calibrate(ctx context.Context, name string, trials int, delta float64, seed *uint64) (*Calibrated, error) {
	c, ok := s.Contracts[name]
	if !ok {
		return nil, refuse(CodeNotFound, "no reward contract named %q in the daemon config", clip(name))
	}
	if trials == 0 {
		trials = DefaultTrials
	}
	if delta == 0 {
		delta = DefaultDelta
	}
	sd := uint64(DefaultSeed)
	if seed != nil {
		sd = *seed
	}
	cal, err := Calibrate(c, trials, delta, sd, s.judgeFor("", nil))
	if err != nil {
		if errors.Is(err, ErrCalibrationRefused) {
			return nil, refuse(CodeCalibrationRefused, "%v", err)
		}
		return nil, err
	}
	calJSON, err := json.MarshalIndent(cal, "", "  ")
	if err != nil {
		return nil, err
	}
	cert := NewCertificate(c, cal, s.Signer.KeyID(), s.now())
	// The certificate starts at the contract's high-water mark: updates
	// below it can no longer be scored, so its expiry counts from there.
	mk, err := s.loadMark(ctx, c.Digest)
	if err != nil {
		return nil, err
	}
	if mk != nil {
		cert.IssuedAtPolicyUpdate = mk.Highest
	}
	certJSON, err := SignCertificate(s.Signer, cert)
	if err != nil {
		return nil, err
	}
	return &Calibrated{Calibration: cal, CalibrationJSON: calJSON, CertificateJSON: certJSON}, nil
}

// ContractInfo describes a registered contract for callers: no effects.
type ContractInfo struct {
	Name               string   `json:"name"`
	ID                 string   `json:"id"`
	Version            string   `json:"version"`
	Digest             string   `json:"reward_contract_digest"`
	CorpusDigest       string   `json:"calibration_corpus_digest"`
	Deployment         string   `json:"deployment"`
	IdentityKeys       []string `json:"identity_keys"`
	CertificateID      string   `json:"certificate_id,omitempty"`
	CertificateEpsilon float64  `json:"certificate_epsilon,omitempty"`
}

// List describes the registered contracts, sorted by name.
func (s *Service) List() []ContractInfo {
	out := make([]ContractInfo, 0, len(s.Contracts))
	for _, name := range slices.Sorted(maps.Keys(s.Contracts)) {
		c := s.Contracts[name]
		info := ContractInfo{Name: name, ID: c.ID, Version: c.Version, Digest: c.Digest, CorpusDigest: c.CorpusDigest, Deployment: c.Deployment, IdentityKeys: c.IdentityKeys}
		if c.Certificate != nil {
			info.CertificateID, info.CertificateEpsilon = c.Certificate.CertificateID, c.Certificate.Epsilon
		}
		out = append(out, info)
	}
	return out
}
