package reward

import (
	"encoding/json"
	"errors"
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
func (s *Service) Calibrate(name string, trials int, delta float64, seed *uint64) (*Calibrated, error) {
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
	cal, err := Calibrate(c, trials, delta, sd)
	if err != nil {
		if errors.Is(err, ErrCalibrationRefused) {
			return nil, refuse("calibration_refused", "%v", err)
		}
		return nil, err
	}
	calJSON, err := json.MarshalIndent(cal, "", "  ")
	if err != nil {
		return nil, err
	}
	cert, err := SignCertificate(s.Signer, NewCertificate(c, cal, s.Signer.KeyID(), s.now()))
	if err != nil {
		return nil, err
	}
	return &Calibrated{Calibration: cal, CalibrationJSON: calJSON, CertificateJSON: cert}, nil
}
