package sign

import (
	"bytes"
	"errors"
	"testing"
)

func TestSignVerify(t *testing.T) {
	data := []byte("a package archive")
	enc, err := GenerateKeyPair([]byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	if !Encrypted(enc.Private) || bytes.Contains(enc.Private, []byte("s3cret")) {
		t.Fatalf("private key not encrypted:\n%s", enc.Private)
	}
	plain, err := GenerateKeyPair(nil)
	if err != nil {
		t.Fatal(err)
	}
	if Encrypted(plain.Private) {
		t.Fatal("a nil password must give an unencrypted key")
	}
	if _, err := GenerateKeyPair([]byte{}); !errors.Is(err, ErrNoPassword) {
		t.Fatalf("empty password: got %v, want ErrNoPassword", err)
	}

	s, err := LoadSigner(enc.Private, []byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	sig, err := s.Sign(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := LoadPublicKey("enc.pub", enc.Public)
	if err != nil {
		t.Fatal(err)
	}
	other, err := LoadPublicKey("plain.pub", plain.Public)
	if err != nil {
		t.Fatal(err)
	}
	if pub.ID != s.KeyID() || pub.ID == other.ID {
		t.Fatalf("key IDs: signer %s, its public key %s, another key %s", s.KeyID(), pub.ID, other.ID)
	}

	got, err := Verify(data, sig, other, pub)
	if err != nil || got != pub {
		t.Fatalf("Verify with the right key among others: %v, %v", got, err)
	}

	tampered := append([]byte{}, data...)
	tampered[0] ^= 1
	for name, tc := range map[string]struct {
		data, sig []byte
		keys      []*PublicKey
		want      error
	}{
		"tampered data":   {tampered, sig, []*PublicKey{pub}, ErrBadSignature},
		"unknown key":     {data, sig, []*PublicKey{other}, ErrBadSignature},
		"no keys":         {data, sig, nil, ErrBadSignature},
		"empty signature": {data, nil, []*PublicKey{pub}, ErrMalformedSignature},
		"not base64":      {data, []byte("%%%"), []*PublicKey{pub}, ErrMalformedSignature},
		"other signature": {data, []byte("MEUCIQ=="), []*PublicKey{pub}, ErrBadSignature},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Verify(tc.data, tc.sig, tc.keys...)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestLoadSignerErrors(t *testing.T) {
	enc, err := GenerateKeyPair([]byte("right"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSigner(enc.Private, nil); !errors.Is(err, ErrNoPassword) {
		t.Errorf("no password: got %v", err)
	}
	if _, err := LoadSigner(enc.Private, []byte("wrong")); !errors.Is(err, ErrBadPassword) {
		t.Errorf("wrong password: got %v", err)
	}
	if _, err := LoadSigner(enc.Public, nil); !errors.Is(err, ErrBadKey) {
		t.Errorf("public key as private: got %v", err)
	}
	if _, err := LoadPublicKey("x", enc.Private); !errors.Is(err, ErrBadKey) {
		t.Errorf("private key as public: got %v", err)
	}
}
