/**
 * The WebSocket class: isows, which is the platform's in browsers and `ws` in Node. Browser
 * builds take native-websocket.browser.ts instead (the package's "browser" field).
 */
export { WebSocket } from 'isows';
