// One navigation's web view. Python (webslot.py) creates a fresh one for every item, sets its
// properties and connects to the signals below; this file only turns the web engine's events
// into plain values and refuses what a public screen must never show.
import QtQuick
import QtWebEngine

WebEngineView {
    id: view

    // Its fade (Fade.qml), started and ended by its region's layer stack (layerstack.py).
    readonly property QtObject fade: fader

    // The per-renderer secret that prefixes the console messages meant for the renderer.
    property string channel: ""
    // The window.pdn context API, injected into every document and frame at creation.
    property string contextScript: ""
    // The request guard (guard.py): asked about every navigation before it leaves, redirects
    // included (its interceptor alone cannot stop a redirected navigation in time).
    // A Python object: `var`, as QML cannot see its type.
    property var guard: null

    signal channelMessage(string text)
    signal loadEvent(int status, int errorCode, string errorString, int errorDomain, string url)
    signal processEnded(int status, int exitCode)
    signal suppressed(string what)
    signal evaluated(string result)

    anchors.fill: parent
    focus: false
    // What a view shows before its page's first frame (webslot.UNPAINTED): near black.
    backgroundColor: Qt.rgba(1 / 255, 2 / 255, 3 / 255, 1)
    audioMuted: true

    settings.showScrollBars: false
    settings.playbackRequiresUserGesture: false
    settings.errorPageEnabled: false
    settings.javascriptCanOpenWindows: false
    settings.focusOnNavigationEnabled: false
    settings.localContentCanAccessFileUrls: false
    settings.localContentCanAccessRemoteUrls: false
    settings.fullScreenSupportEnabled: false

    Component.onCompleted: {
        if (contextScript !== "")
            userScripts.collection = [{
                name: "pdn-context",
                sourceCode: contextScript,
                injectionPoint: WebEngineScript.DocumentCreation,
                worldId: WebEngineScript.MainWorld,
                runsOnSubFrames: true
            }]
    }

    onJavaScriptConsoleMessage: (level, message, line, source) => {
        if (channel !== "" && message.startsWith(channel))
            channelMessage(message.substring(channel.length))
    }
    onLoadingChanged: (info) => loadEvent(info.status, info.errorCode, info.errorString,
                                          info.errorDomain, info.url.toString())
    onRenderProcessTerminated: (status, code) => processEnded(status, code)
    // A modal dialog on a public screen would block the page for ever: refuse it.
    onJavaScriptDialogRequested: (request) => {
        request.accepted = true
        request.dialogReject()
        suppressed("a JavaScript dialog: " + request.message.substring(0, 200))
    }
    onContextMenuRequested: (request) => { request.accepted = true }
    onFullScreenRequested: (request) => request.reject()
    onNavigationRequested: (request) => {
        if (guard !== null && !guard.allows(request.url.toString(), view.url.toString())) {
            request.reject()
            suppressed("a navigation to " + request.url.toString().substring(0, 200))
        }
    }
    onNewWindowRequested: (request) => suppressed("a new window for " + request.requestedUrl)

    // A script in the isolated world of the renderer's own probes (page scripts cannot see it).
    function probe(script: string) { runJavaScript(script, WebEngineScript.ApplicationWorld) }
    // A script in the page's own world (context updates, the idle page's progress).
    function inPage(script: string) { runJavaScript(script, WebEngineScript.MainWorld) }
    // The result of a script in the page's world, as text (diagnostics and tests).
    function evaluate(script: string) {
        runJavaScript(script, WebEngineScript.MainWorld, (result) => evaluated(String(result)))
    }
    function showHtml(html: string, base: url) { loadHtml(html, base) }
    function halt() { stop() }

    Fade { id: fader; target: view }
}
