package seal

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/internal/redact"
	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
)

// Prefix starts every sealed token; a token ends with the first '.' after it.
const Prefix = "kubeplug-sealed."

// KeySecret is the name of the Secret holding the key, in kubeplug's namespace;
// KeyType is its type and keyField the data key of the key.
const (
	KeySecret = "kubeplug-seal-key"
	KeyType   = corev1.SecretType("kubeplug.dev/seal-key.v1")
	keyField  = "key"
	keyLen    = 32
)

// ErrNoKey is returned when a record holds sealed values and the key is gone.
var ErrNoKey = errors.New("the key that sealed them is missing")

// Keys returns the sealing key, creating one when create is set and there is none
// yet; without create, a missing key is ErrNoKey.
type Keys func(ctx context.Context, create bool) ([]byte, error)

// Sealer seals and unseals the sensitive values in record text. It is safe for
// concurrent use.
type Sealer struct {
	keys      Keys
	sensitive *redact.Secrets
	where     string

	mu     sync.Mutex
	aead   cipher.AEAD
	mac    []byte
	rep    *strings.Replacer
	repFor int
}

// New returns a Sealer of the values in sensitive (more may be added to the set
// later, and values it unseals are), with its key from keys. where names the key
// in errors.
func New(keys Keys, sensitive *redact.Secrets, where string) *Sealer {
	if sensitive == nil {
		sensitive = redact.New()
	}
	return &Sealer{keys: keys, sensitive: sensitive, where: where}
}

// Sensitive is the set of values the Sealer seals.
func (s *Sealer) Sensitive() *redact.Secrets {
	if s == nil {
		return nil
	}
	return s.sensitive
}

// Seal returns text with every form of every sensitive value replaced by a token.
// Text that holds none is returned as it is, and no key is read or made.
func (s *Sealer) Seal(ctx context.Context, text []byte) ([]byte, error) {
	if s == nil || s.sensitive.Len() == 0 {
		return text, nil
	}
	forms := s.sensitive.Forms()
	found := false
	for _, f := range forms {
		if bytes.Contains(text, []byte(f)) {
			found = true
			break
		}
	}
	if !found {
		return text, nil
	}
	rep, err := s.replacer(ctx, forms)
	if err != nil {
		return nil, err
	}
	return []byte(rep.Replace(string(text))), nil
}

// Unseal returns text with every token replaced by the value it sealed; text
// without tokens is returned as it is and no key is read.
func (s *Sealer) Unseal(ctx context.Context, text []byte) ([]byte, error) {
	if !bytes.Contains(text, []byte(Prefix)) {
		return text, nil
	}
	if s == nil {
		return nil, fmt.Errorf("the record holds sealed values and nothing can open them")
	}
	aead, _, err := s.cipher(ctx, false)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	var revealed []string
	rest := text
	for {
		i := bytes.Index(rest, []byte(Prefix))
		if i < 0 {
			out.Write(rest)
			break
		}
		out.Write(rest[:i])
		body := rest[i+len(Prefix):]
		end := bytes.IndexByte(body, '.')
		if end < 0 {
			return nil, fmt.Errorf("a sealed value in the record is cut short")
		}
		raw, err := base64.RawURLEncoding.DecodeString(string(body[:end]))
		if err != nil || len(raw) < aead.NonceSize() {
			return nil, fmt.Errorf("a sealed value in the record is malformed")
		}
		plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(Prefix))
		if err != nil {
			return nil, fmt.Errorf("a sealed value in the record cannot be opened with the key in %s (was the key replaced, or the record changed?)", s.where)
		}
		out.Write(plain)
		revealed = append(revealed, string(plain))
		rest = body[end+1:]
	}
	s.sensitive.Add(revealed...)
	return out.Bytes(), nil
}

// replacer is the replacer of forms by their tokens, rebuilt when the set grew.
func (s *Sealer) replacer(ctx context.Context, forms []string) (*strings.Replacer, error) {
	aead, mac, err := s.cipher(ctx, true)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rep != nil && s.repFor == len(forms) {
		return s.rep, nil
	}
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, token(aead, mac, f))
	}
	s.rep, s.repFor = strings.NewReplacer(pairs...), len(forms)
	return s.rep, nil
}

// token seals one value; the nonce is an HMAC of it, so the same value under the
// same key is always the same token.
func token(aead cipher.AEAD, mac []byte, v string) string {
	h := hmac.New(sha256.New, mac)
	h.Write([]byte(v))
	nonce := h.Sum(nil)[:aead.NonceSize()]
	sealed := aead.Seal(append([]byte(nil), nonce...), nonce, []byte(v), []byte(Prefix))
	return Prefix + base64.RawURLEncoding.EncodeToString(sealed) + "."
}

// cipher returns the AEAD and the nonce key, reading (or, with create, making)
// the key once.
func (s *Sealer) cipher(ctx context.Context, create bool) (cipher.AEAD, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aead != nil {
		return s.aead, s.mac, nil
	}
	key, err := s.keys(ctx, create)
	if errors.Is(err, ErrNoKey) {
		return nil, nil, fmt.Errorf("the record holds sealed values and %s is missing: %w", s.where, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read the sealing key %s: %w", s.where, err)
	}
	if len(key) != keyLen {
		return nil, nil, fmt.Errorf("the sealing key %s is %d bytes, not %d", s.where, len(key), keyLen)
	}
	enc := sha256.Sum256(append([]byte("kubeplug seal: encryption\x00"), key...))
	mac := sha256.Sum256(append([]byte("kubeplug seal: nonce\x00"), key...))
	block, err := aes.NewCipher(enc[:])
	if err != nil {
		return nil, nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, nil, err
	}
	s.aead, s.mac = aead, mac[:]
	return s.aead, s.mac, nil
}

// SecretKeys keeps the key in the Secret KeySecret of namespace in the cluster c
// talks to, creating the namespace and the Secret on the first sealing write.
func SecretKeys(c *kube.Client, namespace string) Keys {
	return func(ctx context.Context, create bool) ([]byte, error) {
		var key []byte
		err := c.Retry(ctx, func(ctx context.Context) error {
			sec, err := c.Core.CoreV1().Secrets(namespace).Get(ctx, KeySecret, metav1.GetOptions{})
			if err == nil {
				key = sec.Data[keyField]
				return nil
			}
			if !apierrors.IsNotFound(err) {
				return err
			}
			if !create {
				return ErrNoKey
			}
			if err := c.EnsureNamespace(ctx, namespace); err != nil {
				return err
			}
			fresh := make([]byte, keyLen)
			if _, err := rand.Read(fresh); err != nil {
				return err
			}
			sec = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: KeySecret, Namespace: namespace, Labels: map[string]string{
					kube.LabelManagedBy: kube.FieldManager,
				}},
				Type: KeyType, Data: map[string][]byte{keyField: fresh},
			}
			_, err = c.Core.CoreV1().Secrets(namespace).Create(ctx, sec, metav1.CreateOptions{FieldManager: kube.FieldManager})
			if apierrors.IsAlreadyExists(err) {
				// Another run made it first: use theirs.
				sec, err = c.Core.CoreV1().Secrets(namespace).Get(ctx, KeySecret, metav1.GetOptions{})
				if err == nil {
					key = sec.Data[keyField]
				}
				return err
			}
			if err == nil {
				key = fresh
			}
			return err
		})
		return key, err
	}
}
