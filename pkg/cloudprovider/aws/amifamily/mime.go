package amifamily

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/textproto"
	"strings"
)

// MIME content types cloud-init and nodeadm read from a multi-part archive.
const (
	ContentTypeShellScript = `text/x-shellscript; charset="us-ascii"`
	ContentTypeNodeConfig  = "application/node.eks.aws"
	// mimeBoundary is fixed so that equal inputs give equal user data, and so
	// equal launch template names.
	mimeBoundary = "//"
)

// mimePart is one part of a multi-part user data archive.
type mimePart struct {
	contentType string
	content     string
}

// isMIME reports user data that declares itself a MIME document; cloud-init
// decides the same way, by the first header.
func isMIME(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "MIME-Version:") || strings.HasPrefix(s, "Content-Type:")
}

// parseMIME reads the parts of a multi-part MIME document, in order.
func parseMIME(s string) ([]mimePart, error) {
	msg, err := mail.ReadMessage(strings.NewReader(strings.TrimLeft(s, " \t\r\n")))
	if err != nil {
		return nil, fmt.Errorf("unreadable MIME headers: %w", err)
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		return nil, fmt.Errorf("the MIME document has no valid Content-Type header: %w", err)
	}
	if !strings.HasPrefix(mediaType, "multipart/") {
		return nil, fmt.Errorf("the MIME document is %s, not multipart/mixed", mediaType)
	}
	if params["boundary"] == "" {
		return nil, errors.New("the multipart Content-Type header names no boundary")
	}
	reader := multipart.NewReader(msg.Body, params["boundary"])
	var parts []mimePart
	for {
		p, err := reader.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading MIME part %d: %w", len(parts)+1, err)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("reading MIME part %d: %w", len(parts)+1, err)
		}
		parts = append(parts, mimePart{contentType: p.Header.Get("Content-Type"), content: string(body)})
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("the multipart document has no part delimited by boundary %q", params["boundary"])
	}
	return parts, nil
}

// writeMIME serializes parts as the multi-part archive EC2 user data
// carries, with LF line ends: the standard library writes CRLF, which
// cloud-init accepts but which would make user data differ by platform.
func writeMIME(parts []mimePart) (string, error) {
	var buf bytes.Buffer
	buf.WriteString("MIME-Version: 1.0\n")
	fmt.Fprintf(&buf, "Content-Type: multipart/mixed; boundary=%q\n\n", mimeBoundary)
	w := multipart.NewWriter(&buf)
	if err := w.SetBoundary(mimeBoundary); err != nil {
		return "", err
	}
	for _, p := range parts {
		pw, err := w.CreatePart(textproto.MIMEHeader{"Content-Type": {p.contentType}})
		if err != nil {
			return "", err
		}
		if _, err := io.WriteString(pw, p.content); err != nil {
			return "", err
		}
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return strings.ReplaceAll(buf.String(), "\r\n", "\n"), nil
}
