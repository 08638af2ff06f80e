package apps

import "gorm.io/gorm"

// SetIssuedCertificateMatching replaces the certificate lookup (the
// certificates feature does not exist yet) for a test; restore puts the
// original back.
func SetIssuedCertificateMatching(f func(tx *gorm.DB, domain string) (bool, error)) (restore func()) {
	old := issuedCertificateMatching
	issuedCertificateMatching = f
	return func() { issuedCertificateMatching = old }
}
