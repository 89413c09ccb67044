package check

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/chromedp/chromedp"
)

// RenderPNG renders the report page at html into a PNG at out with
// headless Chromium at chromium, the whole page.
func RenderPNG(html, out, chromium string) error {
	if _, err := os.Stat(chromium); err != nil {
		return fmt.Errorf("no Chromium at %s: %w", chromium, err)
	}
	abs, err := filepath.Abs(html)
	if err != nil {
		return err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.Headless, chromedp.WindowSize(1240, 1000), chromedp.Flag("disable-gpu", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancelC := chromedp.NewContext(actx)
	defer cancelC()
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()
	u := url.URL{Scheme: "file", Path: abs}
	if err := chromedp.Do(ctx, chromedp.Navigate(u.String())); err != nil {
		return fmt.Errorf("render %s: %w", html, err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return fmt.Errorf("render %s: %w", html, err)
	}
	return os.WriteFile(out, png, 0o644)
}
