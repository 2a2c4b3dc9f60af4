package userdata

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/textproto"
	"strings"
)

// part is one document of the user data.
type part struct {
	contentType string
	body        []byte
}

// isMIME reports whether user data is a MIME document, which cloud-init
// recognises by its leading header block.
func isMIME(raw []byte) bool {
	head := strings.ToLower(string(raw[:min(len(raw), 512)]))
	return strings.HasPrefix(strings.TrimLeft(head, "\r\n"), "mime-version:") || strings.HasPrefix(strings.TrimLeft(head, "\r\n"), "content-type:")
}

// mimeParts splits a MIME multipart user data into its parts, as cloud-init
// (and nodeadm after it) do. Content-Transfer-Encoding base64 is decoded.
func mimeParts(raw []byte) ([]part, error) {
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(bytes.TrimLeft(raw, "\r\n"))))
	hdr, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, fmt.Errorf("MIME header: %w", err)
	}
	mediaType, params, err := mime.ParseMediaType(hdr.Get("Content-Type"))
	if err != nil {
		return nil, fmt.Errorf("MIME Content-Type %q: %w", hdr.Get("Content-Type"), err)
	}
	if !strings.HasPrefix(mediaType, "multipart/") {
		body, err := io.ReadAll(tp.R)
		if err != nil {
			return nil, err
		}
		return []part{{contentType: mediaType, body: body}}, nil
	}
	if params["boundary"] == "" {
		return nil, fmt.Errorf("MIME multipart document without a boundary")
	}
	mr := multipart.NewReader(tp.R, params["boundary"])
	var parts []part
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("MIME part %d: %w", len(parts)+1, err)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("MIME part %d: %w", len(parts)+1, err)
		}
		if strings.EqualFold(p.Header.Get("Content-Transfer-Encoding"), "base64") {
			dec, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(string(body)), ""))
			if err != nil {
				return nil, fmt.Errorf("MIME part %d: base64: %w", len(parts)+1, err)
			}
			body = dec
		}
		ct := p.Header.Get("Content-Type")
		if mt, _, err := mime.ParseMediaType(ct); err == nil {
			ct = mt
		}
		parts = append(parts, part{contentType: ct, body: body})
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("MIME multipart document has no parts")
	}
	return parts, nil
}
